/**
 * Whether the Subscriptions bound on this process's websockets (sockets.ts) are still what their sockets bound: an
 * active websocket Subscription, criteria-based for `bind {id}`, topic-based and of the same owner for
 * `bind-with-token`. A socket is told when one no longer is, and unbound from it, whether or not a notification waits
 * for it (one that waits is judged as it is read, sockets.ts pingJudgement): a Subscription set `off` or `error`, or
 * deleted, after its last notification was told nothing and stayed bound. The bound Subscriptions of a tenant are read
 * again when its Subscriptions changed, by the store's change token of Subscription (any process's write, read at
 * most every CHECK_INTERVAL_MS, as the hub reads it; the tokens of every tenant with bound sockets in one statement per
 * 1,000 tenants), and those bound since the last check are read at the next
 * whatever the token (a write may have come between the bind's read and the socket's binding): one search by ids, and one
 * read of the active ones' owners by ids, per 1,000 bound Subscriptions of a tenant whose Subscriptions changed, nothing
 * while none did.
 */
import type { Clock } from '../../clock.ts';
import type { Logger } from '../../log.ts';
import type { Store } from '../../store/types.ts';
import { CHECK_INTERVAL_MS } from './hub.ts';
import { ownerDigest } from './owner.ts';
import { isTopicCriteria } from './topic-subscription.ts';

type Json = Record<string, unknown>;

/** How many bound Subscriptions one search reads. */
const READ_PAGE = 1_000;

/**
 * A bound Subscription as read now: its current version (undefined: deleted, or gone) and, for an active websocket one
 * (criteria- or topic-based), its owner's digest, absent when it has none.
 */
export interface BoundNow {
  tenant: string;
  id: string;
  sub: Json | undefined;
  owner?: string;
}

/**
 * Why an active websocket Subscription without an owner is none to bind: `$import` (or `cinder import`) stored it,
 * writing over the version its owner activated (src/fhir/import/batches.ts), and it notifies nothing until it is
 * activated through the API, whatever its status says (hub.ts).
 */
export const UNOWNED = 'not activated: an import wrote it, and it has no owner until it is written through the API';

/**
 * Why an R4 websocket Subscription (`bind {id}`) may no longer be pinged, as its sockets are told; undefined while it is
 * an active criteria-based websocket Subscription.
 */
export function r4Inactive(sub: Json | undefined): string | undefined {
  if (sub === undefined) return 'deleted';
  const channel = sub.channel as { type?: unknown } | undefined;
  if (sub.status !== 'active') return `status ${String(sub.status)}`;
  if (channel?.type !== 'websocket') return `channel ${String(channel?.type)}`;
  if (isTopicCriteria(sub.criteria)) return 'topic-based now';
  return undefined;
}

/**
 * Why a socket bound with `bind {id}` may no longer be pinged, as read now (`now`, BoundNow): r4Inactive, or UNOWNED for
 * an active one without an owner; undefined while it is an active criteria-based websocket Subscription with one.
 */
export function r4Ended(now: BoundNow): string | undefined {
  return r4Inactive(now.sub) ?? (now.owner === undefined ? UNOWNED : undefined);
}

/** What a socket bound with `bind {id}` is told once the Subscription is no longer active (`why`: r4Inactive, r4Ended). */
export function r4EndedMessage(id: string, why: string): string {
  return `error ${id} is no longer an active websocket Subscription (${why}): no more pings; bind it again once it is active`;
}

/**
 * What a socket bound with `bind-with-token` for the owner digest `boundFor` is told once the Subscription (`now`) is
 * no longer an active topic-based websocket one, or was activated again by another owner; undefined while it is.
 */
export function topicEndedMessage(now: BoundNow, boundFor: string): string | undefined {
  const { id, sub } = now;
  const channel = sub?.channel as { type?: unknown } | undefined;
  const why = sub === undefined ? 'deleted'
    : sub.status !== 'active' ? `status ${String(sub.status)}`
    : channel?.type !== 'websocket' ? `channel ${String(channel?.type)}`
    : !isTopicCriteria(sub.criteria) ? 'criteria-based now'
    : now.owner === undefined ? UNOWNED
    : undefined;
  if (why !== undefined) {
    return `error ${id} is no longer an active topic-based websocket Subscription (${why}): nothing more is sent for it; bind it again with a new binding token (Subscription/${id}/$get-ws-binding-token) once it is active`;
  }
  if (now.owner !== boundFor) return `error ${id} was activated again since it was bound: nothing more is sent for it here; ask Subscription/${id}/$get-ws-binding-token for another`;
  return undefined;
}

/** How many tenants' change tokens one statement reads. */
const TOKEN_PAGE = 1_000;

interface TenantWatch {
  /** Its change token of Subscription as last read (at `checkedAt`), read again once CHECK_INTERVAL_MS passed. */
  token?: string;
  checkedAt: number;
  /** The change token its bound Subscriptions were last read at. */
  seen?: string;
  /** Subscriptions bound since the last check: read at the next whatever the token. */
  fresh: Set<string>;
  /** Whether its last check failed (logged once until one succeeds: a database away fails every round). */
  failing?: boolean;
}

export class BoundStatus {
  private readonly tenants = new Map<string, TenantWatch>();

  constructor(private readonly options: { store: Store; clock: Clock; log: Logger }) {}

  /** Subscription `id` of `tenant` was bound on a socket: read at the next check. */
  bound(tenant: string, id: string): void {
    this.state(tenant).fresh.add(id);
  }

  /**
   * The bound Subscriptions (`bound`: ids by tenant) to judge again, as read now: every one of a tenant whose
   * Subscriptions changed since they were last read, and those bound since. A tenant that cannot be read now is logged
   * and read again at the next check.
   */
  async changed(bound: ReadonlyMap<string, ReadonlySet<string>>): Promise<BoundNow[]> {
    for (const tenant of this.tenants.keys()) if (!bound.has(tenant)) this.tenants.delete(tenant);
    // Taken before anything is awaited (as `bound` was): one bound meanwhile is read at the next check.
    const taken = new Map<string, Set<string>>();
    for (const tenant of bound.keys()) {
      const state = this.state(tenant);
      taken.set(tenant, state.fresh);
      state.fresh = new Set();
    }
    const unread = await this.readTokens([...bound.keys()]);
    const out: BoundNow[] = [];
    for (const [tenant, ids] of bound) {
      const state = this.state(tenant);
      const fresh = taken.get(tenant)!;
      try {
        const token = state.token;
        if (token === undefined || unread.has(tenant)) throw unread.get(tenant) ?? new Error('no change token read');
        const read = token === state.seen ? [...fresh].filter((id) => ids.has(id)) : [...ids];
        if (read.length) out.push(...(await this.read(tenant, read)));
        state.seen = token;
        state.failing = false;
      } catch (err) {
        for (const id of fresh) state.fresh.add(id);
        if (!state.failing) this.options.log.warn('the Subscriptions bound on websockets could not be read; read again at each round until they are', { tenant, err });
        state.failing = true;
      }
    }
    return out;
  }

  /**
   * Reads again the change tokens of those of `tenants` last read CHECK_INTERVAL_MS ago or more (any process's write
   * moves them), 1,000 tenants a statement (one statement a tenant, one after another, took a round 22-80 ms for 100-500 tenants on
   * PostgreSQL, nothing having changed);
   * the tenants whose read failed, with its error.
   */
  private async readTokens(tenants: string[]): Promise<Map<string, unknown>> {
    const now = this.options.clock.now();
    const due = tenants.filter((t) => {
      const state = this.state(t);
      return state.token === undefined || now - state.checkedAt >= CHECK_INTERVAL_MS || now < state.checkedAt;
    });
    const failed = new Map<string, unknown>();
    for (let i = 0; i < due.length; i += TOKEN_PAGE) {
      const page = due.slice(i, i + TOKEN_PAGE);
      try {
        const tokens = await this.options.store.resources.changeTokens(page, ['Subscription']);
        for (const t of page) {
          const state = this.state(t);
          state.token = tokens.get(t);
          state.checkedAt = now;
        }
      } catch (err) {
        for (const t of page) {
          this.state(t).token = undefined;
          failed.set(t, err);
        }
      }
    }
    return failed;
  }

  private state(tenant: string): TenantWatch {
    let state = this.tenants.get(tenant);
    if (!state) {
      state = { checkedAt: 0, fresh: new Set() };
      this.tenants.set(tenant, state);
    }
    return state;
  }

  /** `ids` of `tenant` as they are now (a deleted one's `sub` undefined), an active websocket one with its owner. */
  private async read(tenant: string, ids: string[]): Promise<BoundNow[]> {
    const { store } = this.options;
    const found = new Map<string, Json>();
    for (let i = 0; i < ids.length; i += READ_PAGE) {
      const page = ids.slice(i, i + READ_PAGE);
      for (const row of await store.resources.search(tenant, { type: 'Subscription', where: [{ kind: 'id', ids: page }], sort: [], count: page.length })) {
        found.set(row.id, JSON.parse(row.content) as Json);
      }
    }
    const active = (sub: Json | undefined) => sub?.status === 'active' && (sub.channel as { type?: unknown } | undefined)?.type === 'websocket';
    // The owners of the active ones, read by their ids (one statement per page): the tenant's every owner was read,
    // however few were bound, at each change of any of its Subscriptions.
    const live = ids.filter((id) => active(found.get(id)));
    const owners = new Map<string, string>();
    for (let i = 0; i < live.length; i += READ_PAGE) {
      for (const [id, owner] of await store.subscriptions.ownersOf(tenant, live.slice(i, i + READ_PAGE))) owners.set(id, owner);
    }
    return ids.map((id) => {
      const sub = found.get(id);
      const owner = active(sub) ? owners.get(id) : undefined;
      return { tenant, id, sub, ...(owner !== undefined && { owner: ownerDigest(owner) }) };
    });
  }
}
