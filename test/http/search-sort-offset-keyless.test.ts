/**
 * A page at an offset past every match with the sort's first key (search-sql.ts withoutKey after an
 * offset, no keyed match on the page): the resources without the key start at the offset less the matches
 * with the key. Those are counted on the key's rows with the search's conditions; a search of one
 * condition (more than DRIVER_MAX_ROWS matches, so the walk, not the condition, drives) or of a patient's
 * compartment alone was counted on the condition's (or the compartment's) rows alone, every match with or
 * without the key, and the page repeated the first resources without the key. On both stores.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { TestApp } from '../helpers/app.ts';
import { craftToken, fhirClient, ids, link, type FhirClient } from '../helpers/fhir.ts';
import { appOnFresh } from '../helpers/search-runner.ts';
import { storeTargets } from '../helpers/stores.ts';
import { firstVersions } from '../helpers/versions.ts';

/** Beyond DRIVER_MAX_ROWS (2,000) matches of `status=final`: the sort walk drives. */
const N = 2300;
const id = (i: number) => `o${String((i * 7919) % N).padStart(5, '0')}`;
/** Every 60th dated (one of three days), the rest undated; every 100th `amended`; every 150th of patient p1. */
const dated = (i: number) => i % 60 === 0;
const observation = (i: number) => ({
  resourceType: 'Observation', id: id(i), status: i % 100 === 1 ? 'amended' : 'final', code: { text: 'x' },
  subject: { reference: i % 150 === 7 ? 'Patient/p1' : 'Patient/p0' },
  ...(dated(i) && { effectiveDateTime: `2026-01-0${1 + (i % 3)}` }),
});
const all = Array.from({ length: N }, (_, i) => i);

/** The ids of `is` by `-date` (its ties, and the undated after the dated, by id). */
const byDateDesc = (is: number[]) =>
  [...is].sort((a, b) => (dated(a) !== dated(b) ? (dated(a) ? -1 : 1) : dated(a) && a % 3 !== b % 3 ? (b % 3) - (a % 3) : id(a) < id(b) ? -1 : 1)).map(id);

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

for (const target of targets) {
  describe(`a page at an offset past the matches with the sort's key (${target.kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    let p0: FhirClient;
    beforeAll(async () => {
      ({ t, api } = await appOnFresh(target));
      await t.store.resources.write('t1', (w) => w.insertNew(firstVersions([{ resourceType: 'Patient', id: 'p0', gender: 'female' }, { resourceType: 'Patient', id: 'p1' }])));
      await t.store.resources.write('t1', (w) => w.insertNew(firstVersions(all.map(observation))));
      p0 = fhirClient(t, await craftToken(t, 'patient/*.rs', { patient: 'p0' }));
    }, 60_000);
    afterAll(() => t.close());

    const cases: [string, () => FhirClient, string[]][] = [
      ['status=final&', () => api, byDateDesc(all.filter((i) => i % 100 !== 1))],
      ['', () => api, byDateDesc(all)],
      // A chain: the matches with the key are counted with it probed on each of the key's rows.
      ['subject:Patient.gender=female&', () => api, byDateDesc(all.filter((i) => i % 150 !== 7))],
      // A patient in context: the compartment is the search's one condition.
      ['', () => p0, byDateDesc(all.filter((i) => i % 150 !== 7))],
    ];
    for (const [where, client, expected] of cases) {
      test(`${where}_sort=-date at offsets past the dated${client === cases[3]![1] ? ', in patient p0\'s compartment' : ''}`, async () => {
        const keyed = expected.findIndex((x) => !dated(all.find((i) => id(i) === x)!));
        for (const offset of [keyed - 2, keyed, keyed + 1, keyed + 37, expected.length - 3]) {
          const q = `Observation?${where}_sort=-date&_count=5&_offset=${offset}`;
          const b = await client().search(q);
          expect([q, ids(b)]).toEqual([q, expected.slice(offset, offset + 5)]);
          const next = link(b, 'next');
          if (offset + 5 < expected.length) expect([q, 'next', ids(await client().search(next!))]).toEqual([q, 'next', expected.slice(offset + 5, offset + 10)]);
        }
      }, 60_000);
    }
  });
}
