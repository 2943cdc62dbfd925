import { DEFAULT_ROTATION_DELAY_MS, JWKS_MAX_AGE_S, MIN_ROTATION_DELAY_MS, type RotateOptions } from '../auth/keys.ts';
import { UsageError, type Command } from './command.ts';
import { auditChange, isoTime, openContext, printData } from './context.ts';

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
