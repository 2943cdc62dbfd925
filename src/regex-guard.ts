import { AsyncLocalStorage } from 'node:async_hooks';
import { createHash } from 'node:crypto';
import { linearRegex } from './linear-regex.ts';

/**
 * Regular expressions a client writes (a ValueSet's `regex` filter, FHIRPath `matches()` and
 * `replaceMatches()` in a FHIRPath Patch) run in JavaScriptCore's backtracking engine, where a pattern
 * such as `(a+)+$` takes exponential time: the engine gives up after a fixed amount of backtracking
 * (0.1-0.5 s a run, depending on the pattern and the machine) and answers "no match", and a filter
 * tested on each of a CodeSystem's concepts held the event loop for that long a concept (40 concepts:
 * 15 s), answering wrongly besides. Tested through `guarded`, each pattern keeps an account of its
 * slow runs: a run over SLOW_MS, or slow runs (each over COSTLY_MS) adding up to more than SLOW_MS
 * within DEBT_WINDOW_MS, mark the pattern too costly: that run and every later one of the pattern (in
 * this process) throw the caller's error instead of answering. A request thus pays for a few such runs
 * at most whatever the machine's speed, and no answer rests on a run the engine gave up. A benign
 * pattern on a code or a name takes microseconds, and never runs up an account. A test (`guardedTest`)
 * is answered instead by the pattern's linear-time automaton where it has one (linear-regex.ts), so such
 * a pattern is answered, rightly, rather than refused.
 *
 * Accounts and refusals are kept per tenant (withRegexAccounts, around each FHIR request, `$import` and `$export`
 * job and the completion of a token's scope filters, at `POST /oauth2/launch` or for a Subscription's delivery too):
 * a pattern one tenant proved too costly on its own data (a pattern that backtracks on a code it wrote) is
 * not refused to another, whose data it may run on in microseconds; each tenant pays for its own few runs. Each
 * tenant's are bounded on their own (MAX_PATTERNS): a tenant that proves a thousand patterns too costly starts
 * its own afresh, never another's (one set for all cleared every tenant's refusals, whose patterns then ran again).
 * All tenants' together are bounded too (MAX_HELD): past it, the tenant holding the most gives up its oldest, so a
 * tenant within its share (MAX_HELD over the tenants holding any) loses none to another. A tenant is held only once
 * a run of its is slow (a lookup makes no entry, whatever tenant a request names), and a pattern longer than
 * MAX_KEY_CHARS is kept by its digest, so what is held does not grow with the patterns' length.
 *
 * They are this process's, on purpose, not the database's: a refusal is a bound on the work a pattern costs, which
 * neither the interface nor DESIGN.md asks to persist, not an answer. A restart (or another process sharing the
 * database) pays for the few runs that prove the pattern too costly again, at most about SLOW_MS of one tenant's
 * requests per pattern, and answers as this one did: a run the engine gave up is never an answer, so a pattern
 * is answered by its automaton or refused in every process, never answered wrongly in a fresh one.
 */

/** A run of a pattern longer than this (ms) marks it too costly, as do slow runs adding up to it. */
const SLOW_MS = 100;
/** A run longer than this (ms) counts towards its pattern's account. */
const COSTLY_MS = 5;
/** An account older than this (ms) starts afresh, so that rare pauses (a collection during a run) never add up. */
const DEBT_WINDOW_MS = 60_000;
/** Most patterns a tenant has marked, and most accounts of slow runs it keeps: then its own start afresh. */
const MAX_PATTERNS = 1000;
/** Most refusals and accounts all tenants hold together: past it, the tenant holding the most gives up its oldest. */
export const MAX_HELD = 10_000;
/** A pattern (flags and source) longer than this is kept by its SHA-256 digest. */
const MAX_KEY_CHARS = 256;

/** A tenant's patterns marked too costly (flags and source), and its accounts of their slow runs. */
interface TenantAccounts {
  refused: Set<string>;
  accounts: Map<string, { ms: number; since: number }>;
}

/** Each tenant's accounts ('' for work outside a tenant's: the CLI, start-up). */
const tenants = new Map<string, TenantAccounts>();

/** A tenant's accounts, made when it first has a slow run to keep. */
function accountsOfTenant(tenant: string): TenantAccounts {
  let found = tenants.get(tenant);
  if (found === undefined) tenants.set(tenant, (found = { refused: new Set(), accounts: new Map() }));
  return found;
}

/** The key of a pattern: its flags and source, or their digest when longer than MAX_KEY_CHARS (remembered per RegExp). */
const keys = new WeakMap<RegExp, string>();
function keyOf(re: RegExp): string {
  let key = keys.get(re);
  if (key === undefined) {
    key = `${re.flags}/${re.source}`;
    if (key.length > MAX_KEY_CHARS) key = `#${createHash('sha256').update(key).digest('base64url')}`;
    keys.set(re, key);
  }
  return key;
}

/**
 * How many tenants hold accounts, how many refusals and accounts they hold together, and the characters of their
 * keys (for tests and operators).
 */
export function regexGuardHeld(): { tenants: number; held: number; chars: number } {
  let held = 0;
  let chars = 0;
  for (const t of tenants.values()) {
    held += size(t);
    for (const k of t.refused) chars += k.length;
    for (const k of t.accounts.keys()) chars += k.length;
  }
  return { tenants: tenants.size, held, chars };
}

/**
 * Past MAX_HELD in all, the tenant holding the most gives up its oldest account, else its oldest refusal, until
 * they are within it; a tenant left with none is no longer held.
 */
function withinBound(): void {
  let held = 0;
  for (const t of tenants.values()) held += size(t);
  while (held > MAX_HELD) {
    let most: [string, TenantAccounts] | undefined;
    for (const entry of tenants) {
      if (most === undefined || size(entry[1]) > size(most[1])) most = entry;
    }
    const [tenant, own] = most!;
    const oldest = own.accounts.keys().next();
    if (!oldest.done) own.accounts.delete(oldest.value);
    else own.refused.delete(own.refused.values().next().value!);
    if (size(own) === 0) tenants.delete(tenant);
    held--;
  }
}

function size(t: TenantAccounts): number {
  return t.refused.size + t.accounts.size;
}

/** The tenant whose accounts the runs of the current request or job are kept in (none outside them: one shared account). */
const accountsOf = new AsyncLocalStorage<string>();

/** Runs `fn` with the regex accounts of `tenant`: what its runs prove too costly is refused to it alone. */
export function withRegexAccounts<T>(tenant: string, fn: () => T): T {
  return accountsOf.run(tenant, fn);
}

/**
 * `run` (a test or replace with `re`), unless `re`'s pattern is, or proves, too costly: then the answer
 * is `instead()`'s, or `tooCostly()` is thrown where that has none (undefined).
 */
export function guarded<T>(re: RegExp, run: () => T, tooCostly: () => Error, instead?: () => T | undefined): T {
  const tenant = accountsOf.getStore() ?? '';
  const key = keyOf(re);
  if (tenants.get(tenant)?.refused.has(key)) return otherwise(instead, tooCostly);
  const start = performance.now();
  const result = run();
  const end = performance.now();
  if (end - start <= COSTLY_MS) return result;
  const own = accountsOfTenant(tenant);
  const costly = slowRun(own, key, end - start, end);
  if (costly) {
    if (own.refused.size >= MAX_PATTERNS) own.refused.clear();
    own.refused.add(key);
    own.accounts.delete(key);
  }
  withinBound();
  return costly ? otherwise(instead, tooCostly) : result;
}

function otherwise<T>(instead: (() => T | undefined) | undefined, tooCostly: () => Error): T {
  const answer = instead?.();
  if (answer === undefined) throw tooCostly();
  return answer;
}

/**
 * `re.test(input)` held to the guard, answered in linear time by the pattern's automaton
 * (linear-regex.ts) where it has one: from the first run for a pattern that repeats an ambiguous part
 * (`(a+)+`, the shape that backtracks without end), else once the backtracking engine proved too costly
 * on it. A pattern without such a form (a back reference, a lookaround), or a test past the automaton's
 * budget, throws `tooCostly()` as `guarded` does.
 */
export function guardedTest(re: RegExp, input: string, tooCostly: () => Error): boolean {
  const linear = linearRegex(re);
  if (linear?.nested) return otherwise(() => linear.test(input), tooCostly);
  return guarded(re, () => re.test(input), tooCostly, linear && (() => linear.test(input)));
}

/** Records a slow run of the pattern `key` in a tenant's accounts; true when it makes the pattern too costly. */
function slowRun({ accounts }: TenantAccounts, key: string, ms: number, now: number): boolean {
  let account = accounts.get(key);
  if (account === undefined || now - account.since > DEBT_WINDOW_MS) {
    if (account === undefined && accounts.size >= MAX_PATTERNS) accounts.clear();
    account = { ms: 0, since: now };
    accounts.set(key, account);
  }
  account.ms += ms;
  return account.ms > SLOW_MS;
}
