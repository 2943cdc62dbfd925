import { DEFAULT_ROTATION_DELAY_MS, JWKS_MAX_AGE_S, MIN_ROTATION_DELAY_MS, type RotateOptions } from '../auth/keys.ts';
import { reviewSince, stopReviewed, type ReviewItem } from '../auth/leak-review.ts';
import { UsageError, type Command } from './command.ts';
import { auditChange, isoTime, openContext, printData, printRows, withStore } from './context.ts';
import { cliFhirDeps } from './fhir-deps.ts';

/** The longest hand-over a rotation may be given (seconds): a week. */
export const MAX_ROTATION_DELAY = 7 * 86400;

const MIN_DELAY = MIN_ROTATION_DELAY_MS / 1000;

/** The rotation `--delay` and `--compromised` ask for (a UsageError for a bad combination or value). */
function rotateOptions(values: Record<string, unknown>): RotateOptions {
  const delayText = values.delay;
  if (values.compromised === true) {
    if (delayText !== undefined) throw new UsageError('--compromised takes no --delay: the new keys sign at once');
    return { compromised: true };
  }
  const delay = typeof delayText === 'string' ? Number(delayText) : DEFAULT_ROTATION_DELAY_MS / 1000;
  if (!(Number.isInteger(delay) && delay >= MIN_DELAY && delay <= MAX_ROTATION_DELAY)) {
    throw new UsageError(`--delay takes ${MIN_DELAY}-${MAX_ROTATION_DELAY} seconds (at least the JWK Set's max-age of ${JWKS_MAX_AGE_S} and a minute of clock skew)`);
  }
  return { delayMs: delay * 1000 };
}

/**
 * `cinder keys rotate [--delay <seconds> | --compromised]`: new signing keys, published at once and signing after the
 * delay (the old ones then retire, staying published until their tokens expire); or, for a leak, at once, with the
 * old ones withdrawn.
 */
export const keysRotateCommand: Command = {
  name: 'keys rotate',
  summary: 'Rotate the token signing keys',
  usage:
    'cinder keys rotate [--delay <seconds> | --compromised] [--json]\n\n' +
    'Adds a new ES256 (access tokens) and RS256 (id_tokens) key, published in /oauth2/jwks at once. They start\n' +
    `signing --delay seconds later (default ${DEFAULT_ROTATION_DELAY_MS / 1000}, ${MIN_DELAY}-${MAX_ROTATION_DELAY}), so that applications and resource servers\n` +
    `caching the JWK Set have them first (/oauth2/jwks may be cached ${JWKS_MAX_AGE_S} seconds; the shortest delay adds a minute of\n` +
    'clock skew, so that no copy fetched before the rotation is still held when they sign); the previous keys\n' +
    'sign until then, and stay published until every token they signed has expired. Nothing dated after a key retired is taken as signed by it.\n' +
    '--compromised: the previous keys may have leaked. They are withdrawn at once (no longer published, nothing\n' +
    'they signed is taken: every access token, id_token and login in progress stops working, in every running\n' +
    'server within a minute) and the new keys sign at once.\n' +
    'With CINDER_AUDIT=on the rotation is recorded as an AuditEvent in every tenant.',
  options: { delay: { type: 'string' }, compromised: { type: 'boolean' }, json: { type: 'boolean' } },
  async run(args, io) {
    const options = rotateOptions(args.values);
    const ctx = await openContext(io);
    const { store, keys } = ctx;
    try {
      await keys.init();
      const rotation = await keys.rotate(options);
      // The keys sign every tenant's tokens: each tenant's trail records the rotation, the keys it added and when they
      // sign, and the keys it retired (from then) or withdrew (at once: what an incident's review looks for).
      const signsFrom = isoTime(rotation.signsFrom);
      const oldRole = options.compromised ? 'withdrawn' : 'retired';
      const targets = [
        ...rotation.newKids.map((id) => ({ kind: 'key' as const, id, detail: [['role', 'new'], ['signs-from', signsFrom]] as [string, string][] })),
        ...rotation.oldKids.map((id) => ({ kind: 'key' as const, id, detail: [['role', oldRole], [options.compromised ? 'withdrawn-at' : 'retired-at', signsFrom]] as [string, string][] })),
      ];
      const description = `cinder keys rotate${options.compromised ? ' --compromised' : ''}: ${rotation.newKids.join(', ')} sign from ${signsFrom}` +
        (rotation.oldKids.length ? `; ${rotation.oldKids.join(', ')} ${oldRole}` : '');
      for (const tenant of await store.tenants.list()) await auditChange(ctx, io, 'keys rotate', tenant.id, targets, description);
      const old = options.compromised ? { withdrawn_kids: rotation.oldKids } : { retired_kids: rotation.oldKids };
      printData(io, !!args.values.json, { new_kids: rotation.newKids, signs_from: isoTime(rotation.signsFrom), ...old });
      return 0;
    } finally {
      await store.close();
    }
  },
};

/** `--since` as epoch ms: an ISO 8601 date or date-time (a UsageError otherwise, or for one in the future). */
function sinceOf(text: unknown, now: number): number {
  if (typeof text !== 'string') throw new UsageError('--since is required: when the signing keys may have leaked (ISO 8601, e.g. 2026-03-01T00:00:00Z)');
  const ms = /^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2}))?$/.test(text) ? Date.parse(text) : Number.NaN;
  if (Number.isNaN(ms)) throw new UsageError(`--since takes an ISO 8601 date or date-time with its offset (e.g. 2026-03-01T00:00:00Z), not '${text}'`);
  if (ms > now) throw new UsageError(`--since ${text} is in the future`);
  return ms;
}

/**
 * `cinder keys review --since <time> [--tenant <id>] [--stop] [--json]`: what a token forged with keys leaked at
 * `--since` may have set going that outlives `keys rotate --compromised` (src/auth/leak-review.ts); `--stop` ends it.
 */
export const keysReviewCommand: Command = {
  name: 'keys review',
  summary: 'List (or stop) Subscriptions and export/import jobs written since signing keys leaked',
  usage:
    'cinder keys review --since <time> [--tenant <id>] [--stop] [--json]\n\n' +
    'After `cinder keys rotate --compromised` no token the old keys signed is taken, but what a token forged with\n' +
    'them set going goes on: Subscriptions notify on the authority recorded when they were activated, and export and\n' +
    'import jobs run on their own. Lists, in every tenant (or --tenant), the Subscriptions an app activated whose\n' +
    'current version was written at or after --since (when the keys may have leaked: the date of the backup or dump\n' +
    'that was read; ISO 8601), with their status, owner and endpoint, and the export and import jobs started since.\n' +
    'Which key signed a token is recorded nowhere, and would tell nothing: --compromised withdraws every key.\n' +
    '--stop: turns those Subscriptions off (status off, an error saying why; the app activates one again with a new\n' +
    'token) and cancels those jobs still accepted or in progress. What an app wrote legitimately since is stopped too.\n' +
    'One that cannot be written is named on stderr, the others are stopped all the same, and the command exits 1.\n' +
    'With CINDER_AUDIT=on a --stop is recorded as an AuditEvent in each tenant it stopped something in.',
  options: { since: { type: 'string' }, tenant: { type: 'string' }, stop: { type: 'boolean' }, json: { type: 'boolean' } },
  async run(args, io) {
    const since = sinceOf(args.values.since, Date.now());
    const only = args.values.tenant;
    return withStore(io, async (ctx) => {
      const { store, clock, config } = ctx;
      if (typeof only === 'string' && !(await store.tenants.get(only))) throw new UsageError(`tenant '${only}' does not exist`);
      const tenants = typeof only === 'string' ? [only] : (await store.tenants.list()).map((t) => t.id);
      const review = await reviewSince(store, since, tenants);
      const stopped = args.values.stop === true
        ? await stopReviewed(store, clock, (tenant) => cliFhirDeps(config, store, clock, tenant), review, since)
        : null;
      const key = (i: ReviewItem) => `${i.tenant}/${i.id}`;
      const rows = review.items.map((i) => ({
        kind: i.kind, tenant: i.tenant, id: i.id, client: i.client, user: i.user, state: i.state, at: isoTime(i.at), target: i.target,
        ...(stopped && { stopped: stopped[i.kind].includes(key(i)) }),
      }));
      printRows(io, !!args.values.json, ['kind', 'tenant', 'id', 'client', 'user', 'state', 'at', ...(stopped ? ['stopped'] : []), 'target'], rows);
      if (stopped) {
        for (const tenant of tenants) {
          const ids = (kind: ReviewItem['kind']) => stopped[kind].filter((k) => k.startsWith(`${tenant}/`)).map((k) => k.slice(tenant.length + 1));
          const detail: [string, string][] = [['since', isoTime(since)!]];
          for (const kind of ['subscription', 'export', 'import'] as const) if (ids(kind).length) detail.push([`${kind}s-stopped`, ids(kind).join(' ')]);
          if (detail.length === 1) continue;
          await auditChange(ctx, io, 'keys review', tenant, { kind: 'tenant', id: tenant, detail },
            `cinder keys review --stop --since ${isoTime(since)}: ${detail.slice(1).map(([k, v]) => `${k} ${v}`).join('; ')}`);
        }
        for (const f of stopped.failed) io.stderr(`cinder keys review: ${f.item} was not stopped: ${f.reason}\n`);
        if (stopped.failed.length) return 1;
      }
      return 0;
    });
  },
};
