/**
 * The values `Observation/$stats` computes over, grouped by code (R4 Observation-stats, `code`): for a
 * code asked for, an Observation whose `code` holds it gives its `valueQuantity`, and a component whose
 * `code` holds it that component's. An Observation whose `code` holds it and that is a panel (it has
 * components or `hasMember` references, R4's successor of STU3's `related` of type `has-member`) gives
 * "statistics for each of the individual panel measurements": each component's value, and each
 * member's `valueQuantity`, under that component's or member's own code (its first coding with a code).
 * `total` counts the Observations (panels for their measurements' groups) holding the group's code.
 */
import { FhirError } from '../errors.ts';
import type { StatsCode } from './stats-input.ts';

export interface Coding { system?: string; code?: string; display?: string }
export interface Quantity { value?: number; unit?: string; system?: string; code?: string }
export interface Observation {
  id?: string;
  code?: { coding?: Coding[] };
  valueQuantity?: Quantity;
  component?: { code?: { coding?: Coding[] }; valueQuantity?: Quantity }[];
  hasMember?: { reference?: string }[];
}

/** One group: the code its Observation reports, how many Observations hold it, its values and their units. */
export interface StatsGroup {
  code: StatsCode & { display?: string };
  total: number;
  values: number[];
  units: Map<string, Quantity>;
}

export const holds = (concept: { coding?: Coding[] } | undefined, c: StatsCode) =>
  (concept?.coding ?? []).some((x) => x.code === c.code && (c.system === undefined || x.system === c.system));

/** A quantity's unit: its UCUM (or other system's) code, else its text. */
function unitKey(q: Quantity): string {
  return q.code !== undefined ? `${q.system ?? ''}|${q.code}` : `|${q.unit ?? ''}`;
}

/** The code a panel's measurement is grouped under: its first coding with a code. */
function measurementCode(concept: { coding?: Coding[] } | undefined): (StatsCode & { display?: string }) | undefined {
  const c = (concept?.coding ?? []).find((x) => typeof x.code === 'string');
  if (c === undefined) return undefined;
  return { code: c.code!, ...(c.system !== undefined && { system: c.system }), ...(c.display !== undefined && { display: c.display }) };
}

/** The `Observation/{id}` keys a panel's `hasMember` names (`member`: its key from a reference, if one of this server's). */
export function memberKeys(o: Observation, member: (reference: string) => string | undefined): string[] {
  return (o.hasMember ?? []).flatMap((m) => (typeof m.reference === 'string' ? [member(m.reference)].filter((k): k is string => k !== undefined) : []));
}

/**
 * The groups of code `c` over `observations`, the requested code's own first (when anything holds it,
 * or when there is no other), then the panels' measurements' in order of appearance; `members`: the
 * panels' members that the request may read, by `Observation/{id}`, and `member` the key of a reference.
 */
export function groupsOf(observations: Observation[], c: StatsCode, members: Map<string, Observation>, member: (reference: string) => string | undefined): StatsGroup[] {
  const own: StatsGroup = { code: c, total: 0, values: [], units: new Map() };
  const panel = new Map<string, StatsGroup>();
  const groupOf = (code: StatsCode & { display?: string }) => {
    const key = `${code.system ?? ''}|${code.code}`;
    return panel.get(key) ?? panel.set(key, { code, total: 0, values: [], units: new Map() }).get(key)!;
  };
  for (const o of observations) {
    const touched = new Map<StatsGroup, (Quantity | undefined)[]>();
    const add = (g: StatsGroup, q: Quantity | undefined) => (touched.get(g) ?? touched.set(g, []).get(g)!).push(q);
    if (holds(o.code, c)) {
      const isPanel = (o.component?.length ?? 0) > 0 || (o.hasMember?.length ?? 0) > 0;
      if (!isPanel || o.valueQuantity !== undefined) add(own, o.valueQuantity);
      for (const comp of o.component ?? []) {
        const code = measurementCode(comp.code);
        if (code !== undefined) add(holds(comp.code, c) ? own : groupOf(code), comp.valueQuantity);
      }
      for (const key of memberKeys(o, member)) {
        const m = members.get(key);
        const code = m === undefined ? undefined : measurementCode(m.code);
        if (m !== undefined && code !== undefined) add(groupOf(code), m.valueQuantity);
      }
    } else {
      for (const comp of o.component ?? []) if (holds(comp.code, c)) add(own, comp.valueQuantity);
    }
    for (const [g, quantities] of touched) {
      g.total++;
      for (const q of quantities) {
        if (typeof q?.value !== 'number') continue;
        g.values.push(q.value);
        g.units.set(unitKey(q), q);
      }
    }
  }
  const groups = [...(own.total > 0 || panel.size === 0 ? [own] : []), ...panel.values()];
  for (const g of groups) {
    if (g.units.size <= 1) continue;
    const named = [...g.units.values()].map((q) => q.code ?? q.unit ?? '(none)').sort().join(', ');
    throw new FhirError('unprocessable', `The values of ${g.code.system === undefined ? '' : `${g.code.system}|`}${g.code.code} are in several units (${named}): $stats does not convert them; ask for a period or code of one unit`, { expression: ['code'] });
  }
  return groups;
}
