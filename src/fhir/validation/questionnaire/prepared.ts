/**
 * A Questionnaire made ready for checking responses against it (R4 questionnaire.html): every item by
 * `linkId`, each item's children by `linkId` with their positions, the constraints of its items'
 * extensions (constraints.ts), and its size, counted once when the Questionnaire is loaded and kept while
 * it is cached.
 */
import { readConstraints, type ItemConstraints } from './constraints.ts';

type Json = Record<string, unknown>;

/** How many items a Questionnaire, or items and answers a QuestionnaireResponse, may hold to be checked. */
export const MAX_QUESTIONNAIRE_NODES = 10_000;

export interface QItem {
  linkId: string;
  type: string | undefined;
  text: string | undefined;
  required: boolean;
  repeats: boolean;
  maxLength: number | undefined;
  /** What its extensions constrain (minValue, regex, maxOccurs...). */
  constraints: ItemConstraints;
  json: Json;
  /** Its child items, in order. */
  children: QItem[];
  /** The position of each child by linkId. */
  childIndex: Map<string, number>;
}

export interface PreparedQuestionnaire {
  /** `url|version` (or `url`, or the id), for messages. */
  label: string;
  items: QItem[];
  index: Map<string, number>;
  /** Every item of the Questionnaire by linkId (the first, should linkIds repeat). */
  byLinkId: Map<string, QItem>;
  /** Set when the Questionnaire has more than MAX_QUESTIONNAIRE_NODES items: it is not used. */
  tooLarge: boolean;
  /** The ValueSets it contains, by id (an item's `answerValueSet: "#id"`). */
  valueSets: Map<string, Json>;
  /** Its items' extensions whose values cannot be used, each a sentence (reported as warnings). */
  problems: string[];
}

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function objects(v: unknown): Json[] {
  return Array.isArray(v) ? v.filter(isObject) : [];
}

/** `q` prepared: its items walked once (iteratively, stopping past MAX_QUESTIONNAIRE_NODES). */
export function prepareQuestionnaire(q: Json): PreparedQuestionnaire {
  const url = typeof q.url === 'string' ? q.url : `Questionnaire/${String(q.id ?? '')}`;
  const label = typeof q.version === 'string' ? `${url}|${q.version}` : url;
  const byLinkId = new Map<string, QItem>();
  const problems: string[] = [];
  let count = 0;
  const build = (list: Json[]): { items: QItem[]; index: Map<string, number> } | undefined => {
    const items: QItem[] = [];
    const index = new Map<string, number>();
    for (const json of list) {
      if (++count > MAX_QUESTIONNAIRE_NODES) return undefined;
      const linkId = typeof json.linkId === 'string' ? json.linkId : '';
      const sub = build(objects(json.item));
      if (sub === undefined) return undefined;
      const type = typeof json.type === 'string' ? json.type : undefined;
      const item: QItem = {
        linkId,
        type,
        text: typeof json.text === 'string' ? json.text : undefined,
        required: json.required === true,
        repeats: json.repeats === true,
        maxLength: typeof json.maxLength === 'number' ? json.maxLength : undefined,
        constraints: readConstraints(json, linkId, type, problems),
        json,
        children: sub.items,
        childIndex: sub.index,
      };
      if (!index.has(linkId)) index.set(linkId, items.length);
      if (!byLinkId.has(linkId)) byLinkId.set(linkId, item);
      items.push(item);
    }
    return { items, index };
  };
  const valueSets = new Map<string, Json>();
  for (const c of objects(q.contained)) if (c.resourceType === 'ValueSet' && typeof c.id === 'string') valueSets.set(c.id, c);
  const top = build(objects(q.item));
  if (top === undefined) return { label, items: [], index: new Map(), byLinkId: new Map(), tooLarge: true, valueSets, problems: [] };
  return { label, items: top.items, index: top.index, byLinkId, tooLarge: false, valueSets, problems };
}
