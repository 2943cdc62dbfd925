/**
 * `_include` and `_revinclude` under a token whose reach no index holds whole, on both databases: a
 * patient's token and the Provenance naming a version of another patient's, a Binary whose securityContext
 * the token may not read (src/fhir/search.ts addIncludes). Their statements read MAX_INCLUDES and one
 * more; those out of reach were dropped after it, so that the rows within reach after them were left out,
 * with no `too-costly` warning. What is included must be what the token would get were the rows out of
 * its reach not there: every one within reach up to MAX_INCLUDES, and the warning exactly when some
 * within reach were left out; past 20,000 out of reach (PAGE_READ_IN_REACH), a 400 `too-costly`.
 * Canonical references are read all, MAX_SEARCH_VALUES a statement (those past the first 1,000 were dropped).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { createBatchWriter, DEFAULT_BATCH_LIMITS } from '../../src/fhir/import/batches.ts';

const MAX_INCLUDES = 1000;
/** PAGE_READ_IN_REACH: the most rows out of reach a search's includes read past. */
const BOUND = 20_000;
const PATIENT_TOKEN = 'launch/patient patient/Patient.rs patient/Observation.rs patient/Provenance.rs patient/Binary.rs';
const n4 = (i: number) => String(i).padStart(4, '0');
const provenance = (id: string, target: string): Json => ({
  resourceType: 'Provenance', id, target: [{ reference: target }], recorded: '2024-01-02T03:04:05Z', agent: [{ who: { reference: 'Practitioner/dr1' } }],
});
const binary = (id: string, context: string): Json => ({ resourceType: 'Binary', id, contentType: 'text/plain', data: 'aGk=', securityContext: { reference: context } });
const observation = (id: string, patient: string, extra: Json = {}): Json => ({ resourceType: 'Observation', id, status: 'final', code: { text: id }, subject: { reference: `Patient/${patient}` }, ...extra });

await eachStore((kind, fresh) => {
  describe(`included resources past those out of a token's reach (${kind})`, () => {
    let t: TestApp;
    let admin: FhirClient;
    /** Writes `resources` as the importer does (one transaction a batch), for the thousands these tests need. */
    const write = async (resources: Json[]) => {
      const writer = createBatchWriter({ store: t.store, clock: t.clock }, 't1', DEFAULT_BATCH_LIMITS, () => undefined);
      for (const r of resources) await writer.addPrepared([writer.prepare(r as { resourceType: string })]);
      await writer.drain();
    };
    const included = (b: Json) => (b.entry ?? []).filter((e: Json) => e.search?.mode === 'include').map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`).sort();
    const warned = (b: Json) => (b.entry ?? []).some((e: Json) => e.search?.mode === 'outcome' && e.resource.issue.some((i: Json) => i.code === 'too-costly'));
    const hidden = Array.from({ length: MAX_INCLUDES + 1 }, (_, i) => `h-${n4(i)}`);

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      admin = fhirClient(t, await t.token());
      // `mv` was p2's (version 1) and is p1's now: the Provenance of its version 1 are out of p1's reach.
      for (const r of [{ resourceType: 'Patient', id: 'p1' }, { resourceType: 'Patient', id: 'p2' }, observation('mv', 'p2'), observation('mv', 'p1')]) await admin.put200(r);
      // In id order the Provenance and Binaries out of reach (`h-`, `bh-`) come first, a statement's worth and one more.
      await write([
        ...hidden.map((id) => provenance(id, 'Observation/mv/_history/1')),
        ...Array.from({ length: MAX_INCLUDES }, (_, i) => provenance(`v-${n4(i)}`, 'Observation/mv')),
        ...hidden.map((id) => binary(`b${id}`, 'Patient/p2')),
        binary('bv-1', 'Patient/p1'),
      ]);
      // An Observation of p1 about Provenance and Binaries: a statement's worth of those out of reach first.
      await admin.put200(observation('about', 'p1', { focus: [...hidden, 'v-0000'].map((id) => ({ reference: `Provenance/${id}` })) }));
      await admin.put200(observation('files', 'p1', { focus: [...hidden.map((id) => `b${id}`), 'bv-1'].map((id) => ({ reference: `Binary/${id}` })) }));
    }, 120_000);
    afterAll(() => t.close());

    test('a _revinclude reads on past the Provenance out of reach: all within reach, and the warning only past MAX_INCLUDES of them', async () => {
      const p1 = fhirClient(t, await craftToken(t, PATIENT_TOKEN, { patient: 'p1' }));
      const visible = Array.from({ length: MAX_INCLUDES }, (_, i) => `Provenance/v-${n4(i)}`);
      let b = await p1.search('Observation?_id=mv&_revinclude=Provenance:target');
      expect({ included: included(b).length, warned: warned(b) }).toEqual({ included: MAX_INCLUDES, warned: false });
      expect(included(b)).toEqual(visible);
      // One more within reach: MAX_INCLUDES of them, and the warning.
      await admin.put200(provenance('v-1000', 'Observation/mv'));
      b = await p1.search('Observation?_id=mv&_revinclude=Provenance:target');
      expect({ included: included(b).length, warned: warned(b) }).toEqual({ included: MAX_INCLUDES, warned: true });
      expect(included(b)).toEqual(visible);
      expect((await admin.del('Provenance/v-1000')).status).toBeLessThan(300);
      // The admin's token, which reaches them all, gets the first MAX_INCLUDES in id order and the warning, as before.
      b = await admin.search('Observation?_id=mv&_revinclude=Provenance:target');
      expect({ included: included(b).length, warned: warned(b), first: included(b)[0] }).toEqual({ included: MAX_INCLUDES, warned: true, first: 'Provenance/h-0000' });
    }, 60_000);

    test('an _include reads every reference, past the Provenance and Binaries out of reach', async () => {
      const p1 = fhirClient(t, await craftToken(t, PATIENT_TOKEN, { patient: 'p1' }));
      for (const [query, expected] of [
        ['Observation?_id=about&_include=Observation:focus', ['Provenance/v-0000']],
        ['Observation?_id=files&_include=Observation:focus', ['Binary/bv-1']],
        ['Observation?_id=about,files&_include=Observation:focus', ['Binary/bv-1', 'Provenance/v-0000']],
      ] as const) {
        const b = await p1.search(query);
        expect({ query, included: included(b), warned: warned(b) }).toEqual({ query, included: [...expected], warned: false });
      }
      // The admin's token reaches every one: MAX_INCLUDES of them, and the warning.
      const b = await admin.search('Observation?_id=files&_include=Observation:focus');
      expect({ included: included(b).length, warned: warned(b) }).toEqual({ included: MAX_INCLUDES, warned: true });
    }, 60_000);

    test('a statement filled with resources already in the Bundle reads on, whatever the token', async () => {
      // `m-*` (a page of 1,000) name `hub` as focus and member; `z-*` name it as member alone. The members of
      // `hub` are the page again and then the `z-*`: a statement of 1,001 held the page and `z-0000` alone.
      const member = (id: string, focus: boolean): Json => ({ ...observation(id, 'p1', { hasMember: [{ reference: 'Observation/hub' }] }), ...(focus ? { focus: [{ reference: 'Observation/hub' }] } : {}) });
      await write([observation('hub', 'p1'), ...Array.from({ length: MAX_INCLUDES }, (_, i) => member(`m-${n4(i)}`, true)), ...Array.from({ length: 5 }, (_, i) => member(`z-${n4(i)}`, false))]);
      const query = `Observation?focus=Observation/hub&_count=${MAX_INCLUDES}&_include=Observation:focus&_revinclude:iterate=Observation:has-member`;
      const expected = ['Observation/hub', ...Array.from({ length: 5 }, (_, i) => `Observation/z-${n4(i)}`)];
      for (const api of [admin, fhirClient(t, await craftToken(t, PATIENT_TOKEN, { patient: 'p1' }))]) {
        const b = await api.search(query);
        expect({ included: included(b), warned: warned(b) }).toEqual({ included: expected, warned: false });
      }
    }, 60_000);

    test('an _include of canonical references reads them all, past MAX_SEARCH_VALUES (1,000) a statement', async () => {
      // A CarePlan instantiating 1,100 Questionnaires by canonical, of which the last 1,000 are held: they are all included.
      const url = (i: number) => `http://example.org/Questionnaire/c-${n4(i)}`;
      const questionnaire = (i: number): Json => ({ resourceType: 'Questionnaire', id: `c-${n4(i)}`, url: url(i), status: 'active' });
      await write([
        { resourceType: 'CarePlan', id: 'plan', status: 'active', intent: 'plan', subject: { reference: 'Patient/p1' }, instantiatesCanonical: Array.from({ length: 1100 }, (_, i) => url(i)) },
        ...Array.from({ length: MAX_INCLUDES }, (_, i) => questionnaire(i + 100)),
      ]);
      const expected = Array.from({ length: MAX_INCLUDES }, (_, i) => `Questionnaire/c-${n4(i + 100)}`);
      for (const query of ['CarePlan?_id=plan&_include=CarePlan:instantiates-canonical:Questionnaire', 'CarePlan?_id=plan&_include=CarePlan:instantiates-canonical']) {
        const b = await admin.search(query);
        expect({ query, included: included(b).length, warned: warned(b) }).toEqual({ query, included: MAX_INCLUDES, warned: false });
        expect(included(b)).toEqual(expected);
      }
      // One more held, named first: MAX_INCLUDES of them, and the warning.
      await admin.put200(questionnaire(0));
      const b = await admin.search('CarePlan?_id=plan&_include=CarePlan:instantiates-canonical:Questionnaire');
      expect({ included: included(b).length, warned: warned(b), first: included(b)[0] }).toEqual({ included: MAX_INCLUDES, warned: true, first: 'Questionnaire/c-0000' });
    }, 60_000);

    test('references to resources not held count toward the bound: past 20,000 of them read to no purpose, a 400 too-costly', async () => {
      // References to ids, and canonicals, that nothing holds cost nothing to write, and each one was read (a statement of 1,000 at a time) without bound.
      const missing = (n: number) => Array.from({ length: n }, (_, i) => `none-${String(i).padStart(5, '0')}`);
      const url = (id: string) => `http://example.org/Questionnaire/${id}`;
      await write([
        observation('refs-bound', 'p1', { focus: [...missing(BOUND), 'p1'].map((id) => ({ reference: `Patient/${id}` })) }),
        observation('refs-past', 'p1', { focus: [...missing(BOUND + 1), 'p1'].map((id) => ({ reference: `Patient/${id}` })) }),
        { resourceType: 'CarePlan', id: 'canon-bound', status: 'active', intent: 'plan', subject: { reference: 'Patient/p1' }, instantiatesCanonical: missing(BOUND).map(url) },
        { resourceType: 'CarePlan', id: 'canon-past', status: 'active', intent: 'plan', subject: { reference: 'Patient/p1' }, instantiatesCanonical: missing(BOUND + 1).map(url) },
      ]);
      let b = await admin.search('Observation?_id=refs-bound&_include=Observation:focus');
      expect({ included: included(b), warned: warned(b) }).toEqual({ included: ['Patient/p1'], warned: false });
      b = await admin.search('CarePlan?_id=canon-bound&_include=CarePlan:instantiates-canonical:Questionnaire');
      expect({ included: included(b), warned: warned(b) }).toEqual({ included: [], warned: false });
      for (const [query, type] of [['Observation?_id=refs-past&_include=Observation:focus', 'Patient'], ['CarePlan?_id=canon-past&_include=CarePlan:instantiates-canonical:Questionnaire', 'Questionnaire']] as const) {
        const outcome = await expectOutcome(await admin.get(query), 400, 'too-costly');
        expect({ query, diagnostics: outcome.issue[0].diagnostics, expression: outcome.issue[0].expression }).toEqual({
          query, diagnostics: expect.stringContaining(`more than 20000 references to ${type} resources that are not held`), expression: ['_include'],
        });
      }
    }, 60_000);

    test('versions not held count toward the bound too: past 20,000 of them read to no purpose, a 400 too-costly', async () => {
      // Each version-specific reference is a read of its own: tens of thousands of versions not held were each read, without bound.
      const missing = (n: number) => Array.from({ length: n }, (_, i) => `Patient/none-${String(i).padStart(5, '0')}/_history/1`);
      await write([
        observation('vers-bound', 'p1', { focus: [...missing(BOUND), 'Patient/p1/_history/1'].map((reference) => ({ reference })) }),
        observation('vers-past', 'p1', { focus: [...missing(BOUND + 1), 'Patient/p1/_history/1'].map((reference) => ({ reference })) }),
      ]);
      const b = await admin.search('Observation?_id=vers-bound&_include=Observation:focus');
      expect({ included: included(b), warned: warned(b) }).toEqual({ included: ['Patient/p1'], warned: false });
      const outcome = await expectOutcome(await admin.get('Observation?_id=vers-past&_include=Observation:focus'), 400, 'too-costly');
      expect({ diagnostics: outcome.issue[0].diagnostics, expression: outcome.issue[0].expression }).toEqual({
        diagnostics: expect.stringContaining('more than 20000 versions of Patient resources that are not held'), expression: ['_include'],
      });
    }, 120_000);

    test('canonicals followed in an earlier round are not read again: a long chain through resources included already is followed to its end', async () => {
      // Libraries c-000 -> c-001 -> ... -> c-099, each also depending on the same 210 hubs: every round past the
      // first names the 210 again (included in the first), 99 x 210 = 20,790 canonicals read to no purpose when
      // each round read them anew, past PAGE_READ_IN_REACH.
      const HUBS = 210;
      const CHAIN = 100;
      const url = (id: string) => `http://example.org/Library/${id}`;
      const hubs = Array.from({ length: HUBS }, (_, i) => `hub-${n4(i)}`);
      const chain = Array.from({ length: CHAIN }, (_, i) => `c-${String(i).padStart(3, '0')}`);
      const library = (id: string, dependsOn: string[]): Json => ({
        resourceType: 'Library', id, url: url(id), status: 'active',
        type: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/library-type', code: 'logic-library' }] },
        ...(dependsOn.length && { relatedArtifact: dependsOn.map((d) => ({ type: 'depends-on', resource: url(d) })) }),
      });
      await write([
        ...hubs.map((id) => library(id, [])),
        ...chain.map((id, i) => library(id, [...(i + 1 < CHAIN ? [chain[i + 1]!] : []), ...hubs])),
      ]);
      const b = await admin.search(`Library?_id=${chain[0]}&_include:iterate=Library:depends-on:Library`);
      expect({ included: included(b).length, warned: warned(b) }).toEqual({ included: CHAIN - 1 + HUBS, warned: false });
      expect(included(b)).toEqual([...chain.slice(1), ...hubs].map((id) => `Library/${id}`).sort());
    }, 60_000);

    test('they read past 20,000 out of reach, and past one more are a 400 too-costly', async () => {
      const p1 = fhirClient(t, await craftToken(t, PATIENT_TOKEN, { patient: 'p1' }));
      // As many out of reach as the bound (PAGE_READ_IN_REACH) before those in reach, in id order.
      await write(Array.from({ length: BOUND - hidden.length }, (_, i) => provenance(`h-${hidden.length + i}`, 'Observation/mv/_history/1')));
      const query = 'Observation?_id=mv&_revinclude=Provenance:target';
      const b = await p1.search(query);
      expect({ included: included(b).length, warned: warned(b), first: included(b)[0] }).toEqual({ included: MAX_INCLUDES, warned: false, first: 'Provenance/v-0000' });
      await admin.put200(provenance(`h-${BOUND}`, 'Observation/mv/_history/1'));
      const outcome = await expectOutcome(await p1.get(query), 400, 'too-costly');
      expect(outcome.issue[0].diagnostics).toStartWith('The included resources of this search take reading more than 20000 Provenance resources');
    }, 60_000);
  });
});
