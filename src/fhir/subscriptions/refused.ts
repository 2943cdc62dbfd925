/**
 * The `error` of an activated Subscription the server set `error` because what it rests on no longer accepts it, as the
 * hub compiles it again (hub.ts load): a topic-based one whose topic refuses it (a 422 of findTopic or compileTopic: the
 * topic deleted, no longer active, its canFilterBy or resourceTrigger edited since the activation, or a filter an older
 * release let through), or an R4 criteria one whose criteria no longer compile (a 4xx of compileCriteria: the ValueSet or
 * code system its `:in`, `:below` or `:above` names deleted, or a search an older release ran that this one does not).
 * Its words say what refuses and where (the refusal's expression), and that the server sets it back to the status it had
 * once the topic accepts it, or the criteria compile, again (hub.ts pausedForTopic, at the write of the topic, ValueSet or
 * CodeSystem that brings it about, or at serve's start): the Backport IG's error to active once the server can deliver
 * again. Its app may also write it again (status `requested`), which is judged as any activation.
 * Told apart by their head and tail (refusedPauseOf), found among the Subscriptions in `error` by their words
 * (hub.ts pausedQuery, a full-text search); the history check of client-authority.ts statusBefore keeps a client's copy of
 * these words from setting anything back.
 */
import type { FhirError } from '../../errors.ts';

type Json = Record<string, unknown>;

/** What refuses a Subscription so: its topic, or its criteria. */
export type RefusedBy = 'topic' | 'criteria';

const HEADS: Record<RefusedBy, string> = {
  topic: 'its topic no longer accepts it, so it notifies nothing: ',
  criteria: 'its criteria no longer compile, so it notifies nothing: ',
};
const TAILS: Record<RefusedBy, string> = {
  topic: '. The server sets it back to the status it had once its topic accepts it again; or write it again with status requested, asking for what the topic offers now',
  criteria: '. The server sets it back to the status it had once they compile again; or write it again with status requested, with criteria Cinder can run',
};
/** The tail a topic refusal's `error` had in the release before, when nothing set it back: such a one is set back as well. */
const EARLIER_TOPIC_TAIL = '. Write it again with status requested, asking for what the topic offers now';

/** The head of a topic refusal's `error`. */
export const TOPIC_REFUSED_HEAD = HEADS.topic;
/** The head of a criteria refusal's `error`. */
export const CRITERIA_REFUSED_HEAD = HEADS.criteria;

/** The `error` of a Subscription refused by `by`, for `err` (its message and where: the refusal's first expression). */
export function refusedError(by: RefusedBy, err: FhirError): string {
  const at = err.issues[0]?.expression?.join(', ');
  return `${HEADS[by]}${err.message}${at ? ` (at ${at})` : ''}${TAILS[by]}`;
}

/** The `error` of a topic-based Subscription its topic refuses (refusedError). */
export function topicRefusedError(err: FhirError): string {
  return refusedError('topic', err);
}

/** What refused `sub` (a Subscription as stored), if it stands in `error` so (refusedError's words, or an earlier release's). */
export function refusedPauseOf(sub: Json): RefusedBy | undefined {
  const error = sub.error;
  if (sub.status !== 'error' || typeof error !== 'string') return undefined;
  for (const by of ['topic', 'criteria'] as const) {
    if (error.startsWith(HEADS[by]) && error.length > HEADS[by].length + TAILS[by].length && error.endsWith(TAILS[by])) return by;
  }
  return error.startsWith(HEADS.topic) && error.length > HEADS.topic.length + EARLIER_TOPIC_TAIL.length && error.endsWith(EARLIER_TOPIC_TAIL) ? 'topic' : undefined;
}
