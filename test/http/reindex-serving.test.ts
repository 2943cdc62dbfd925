/**
 * Serving while the search index is rebuilt (`cinder serve` on a database of an older index model):
 * reads, writes and every search the older rows answer completely go on; a search reading rows not yet
 * rebuilt answers 503 with Retry-After, never an incomplete Bundle; /readyz reports the progress. And
 * `cinder serve` itself listens before its reindex ends, and searches find the rebuilt rows after it.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { canonicalParam, sortParam, storedIndex } from '../../src/fhir/indexer.ts';
import { INDEX_MODEL, readsRowsBeingRebuilt, reindex, type Rebuilding } from '../../src/fhir/reindex.ts';
import type { Condition } from '../../src/store/interface/search.ts';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import { createClient } from '../../src/auth/admin.ts';
import { CLIENT_CACHE_TTL_MS } from '../../src/auth/client-cache.ts';
import { signAccessToken } from '../../src/auth/tokens.ts';
import { createUser } from '../../src/auth/users.ts';
import { createTestApp, fhirInit } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, type Json } from '../helpers/fhir.ts';
import { eventually } from '../helpers/processes.ts';

const UCUM = 'http://unitsofmeasure.org';
const LOINC = 'http://loinc.org';
const observation = (id: string, mg: number): Json => ({
  resourceType: 'Observation', id, status: 'final', subject: { reference: 'Patient/p1' },
  code: { coding: [{ system: LOINC, code: '2345-7' }] }, valueQuantity: { value: mg, unit: 'mg', system: UCUM, code: 'mg' },
});

await eachStore((kind, fresh) => {
  describe(`serving beside a reindex on ${kind}`, () => {
    test('from model 4: only searches reading quantity rows, contained resources\' rows, references, compartments, dates or strings wait; reads, writes and other searches answer', async () => {
      let rebuilding: Rebuilding | undefined = { from: 4, examined: 1_500 };
      const t = await createTestApp({ store: await fresh(), rebuilding: () => rebuilding });
      try {
        const api = fhirClient(t, await t.token());
        await api.put200({ resourceType: 'Patient', id: 'p1', name: [{ family: 'Chalmers' }] });
        await api.put200(observation('o1', 5.4));

        const refused = async (query: string) => {
          const res = await api.get(query);
          expect(res.status).toBe(503);
          expect(res.headers.get('retry-after')).toBe('30');
          const outcome = (await res.json()) as Json;
          expect(outcome.resourceType).toBe('OperationOutcome');
          expect(outcome.issue[0].code).toBe('transient');
          expect(outcome.issue[0].diagnostics).toContain('1500 resources examined');
        };
        // A UCUM unit reads the canonical rows model 5 added: directly, in a composite, under `_has`, in `_filter`.
        await refused(`Observation?value-quantity=5.4|${UCUM}|mg`);
        await refused(`Observation?value-quantity=5400|${UCUM}|ug&_summary=count`);
        await refused(`Observation?code-value-quantity=${LOINC}|2345-7$5.4|${UCUM}|mg`);
        await refused(`Patient?_has:Observation:subject:value-quantity=5.4|${UCUM}|mg`);
        await refused(`Observation?_filter=${encodeURIComponent(`value-quantity eq 5.4|${UCUM}|mg`)}`);
        // Model 6 added the rows of contained resources, which every chain reads, and reference rows of
        // contained ones, which `:missing` on a reference reads.
        await refused(`Observation?code=${LOINC}|2345-7&subject:Patient.name=chalmers`);
        await refused('Observation?subject:missing=true');
        // Model 8 changed reference rows (another server's URL) and compartments: references, `_has` and
        // compartment searches wait too.
        await refused('Observation?subject=Patient/p1');
        await refused('Patient?_has:Observation:subject:code=2345-7');
        await refused('Patient/p1/Observation');
        await refused('Patient/p1/$everything');
        await refused('Patient/$everything');
        // Model 9 changed date ranges (Timings, short fractions of a second): date searches wait too.
        await refused('Observation?date=2026');
        await refused(`Observation?code-value-date=${LOINC}|2345-7$2026`);
        await refused(`Observation?_filter=${encodeURIComponent('date ge 2026-01-01')}`);
        // Model 10 changed normalised strings (full case folding): string searches but `:exact`, token
        // `:text`, and `_filter` on strings wait too.
        await refused('Patient?family=chalmers');
        await refused('Patient?name:contains=alm');
        await refused('Observation?code:text=glucose');
        await refused(`Patient?_filter=${encodeURIComponent('family eq chalmers')}`);
        // Model 12 gave a Range's stated unit a row: a quantity by a unit code without a system waits too.
        await refused('Observation?value-quantity=5.4||mg');
        // Model 14 made a Quantity with a comparator a range: every number and quantity search waits too.
        await refused('Observation?value-quantity=5.4');
        await refused('Observation?value-quantity=gt6');
        // Model 15 composed the text `:exact` compares (NFC): `:exact` waits too.
        await refused('Patient?family:exact=Chalmers');
        // Conditional create runs the same search: it waits too, and creates nothing.
        const conditional = await api.post('Observation', observation('ignored', 1), { 'If-None-Exist': `value-quantity=5.4|${UCUM}|mg` });
        expect(conditional.status).toBe(503);

        // Everything else answers as usual.
        const ids = async (query: string) => ((await api.search(query)).entry ?? []).map((e: Json) => e.resource.id).sort();
        expect(await ids('Observation?_include=Observation:subject')).toEqual(['o1', 'p1']);
        expect(await ids('Observation?code=2345-7')).toEqual(['o1']);
        expect(await ids('Observation?_lastUpdated=ge2026-01-01')).toEqual(['o1']);
        expect((await api.get('Observation/o1')).status).toBe(200);
        await api.put200(observation('o2', 7));
        expect((await api.get('Observation/o1/_history')).status).toBe(200);

        const ready = await t.request('/readyz');
        expect(ready.status).toBe(200);
        expect(await ready.json()).toMatchObject({ status: 'ok', searchIndex: { status: 'rebuilding', examined: 1_500 } });

        // Once the rebuild is done, the same searches answer (rows written meanwhile follow the new model).
        rebuilding = undefined;
        expect(await ids('Observation?value-quantity=5.4')).toEqual(['o1']);
        expect(await ids('Observation?value-quantity=gt6')).toEqual(['o2']);
        expect(await ids('Patient?family:exact=Chalmers')).toEqual(['p1']);
        expect(await ids(`Observation?value-quantity=7000|${UCUM}|ug`)).toEqual(['o2']);
        expect(await ids(`Observation?value-quantity=5400|${UCUM}|ug`)).toEqual(['o1']);
        expect(await ids('Observation?value-quantity=5.4||mg')).toEqual(['o1']);
        expect(await ids(`Observation?code=${LOINC}|2345-7&subject:Patient.name=chalmers`)).toEqual(['o1', 'o2']);
        expect(await ids('Patient?_has:Observation:subject:code=2345-7')).toEqual(['p1']);
        expect(await ids('Patient/p1/Observation')).toEqual(['o1', 'o2']);
        expect(await ids('Patient/$everything')).toEqual(['o1', 'o2', 'p1']);
        expect(await (await t.request('/readyz')).json()).not.toHaveProperty('searchIndex');
      } finally {
        await t.close();
      }
    });

    test('from model 8 (compartments as they are now): $everything answers while searches on the rows being rebuilt wait', async () => {
      const t = await createTestApp({ store: await fresh(), rebuilding: () => ({ from: 8, examined: 10 }) });
      try {
        const api = fhirClient(t, await t.token());
        await api.put200({ resourceType: 'Patient', id: 'p1', name: [{ family: 'Chalmers' }] });
        await api.put200(observation('o1', 5.4));
        const ids = async (query: string) => ((await api.search(query)).entry ?? []).map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`);
        expect(await ids('Patient/$everything')).toEqual(['Patient/p1', 'Observation/o1']);
        expect(await ids('Patient/p1/$everything?_count=1')).toEqual(['Patient/p1']);
        expect((await api.get('Patient?family=chalmers')).status).toBe(503);
      } finally {
        await t.close();
      }
    });

    test('the reindex pauses within a batch for the server; a write made meanwhile keeps its own rows', async () => {
      const t = await createTestApp({ store: await fresh() });
      try {
        const api = fhirClient(t, await t.token());
        for (const [id, family] of [['a', 'Alpha'], ['b', 'Beta'], ['c', 'Old']]) await api.put200({ resourceType: 'Patient', id, name: [{ family }] });
        await t.store.resources.indexing.setState({ model: 0, after: 0 });
        let pauses = 0;
        const run = await reindex(t.store, {
          batch: 10,
          pause: {
            everyMs: 0,
            // The server's turn: the batch was read already, and `c` changes before it is written.
            wait: async () => {
              if (pauses++ === 1) await api.put200({ resourceType: 'Patient', id: 'c', name: [{ family: 'New' }] });
            },
          },
        });
        expect(run).toMatchObject({ ran: true, done: 3, rebuilt: 3 });
        expect(pauses).toBe(3);
        const ids = async (q: string) => ((await api.search(`Patient?${q}`)).entry ?? []).map((e: Json) => e.resource.id).sort();
        expect(await ids('family=new')).toEqual(['c']);
        expect(await ids('family=old')).toEqual([]);
        expect(await ids('family=alpha,beta')).toEqual(['a', 'b']);
        expect(await t.store.resources.indexing.state()).toEqual({ model: INDEX_MODEL, after: 0 });
      } finally {
        await t.close();
      }
    });

    test('from model 17 on resources of every kind: token :text and :missing wait, other searches answer, and after it a Coding\'s display without a code is found, writes made meanwhile too', async () => {
      let rebuilding: Rebuilding | undefined;
      const t = await createTestApp({ store: await fresh(), rebuilding: () => rebuilding });
      try {
        const api = fhirClient(t, await t.token());
        await api.put200({ resourceType: 'Patient', id: 'p1', name: [{ family: 'Chalmers' }] });
        const codes = [{ coding: [{ display: 'Back pain' }] }, { coding: [{ system: 'urn:rv', code: 'A', display: 'Aura' }] }, { text: 'Back pain, low' }, undefined];
        const condition = (i: number, code = codes[i % 4]): Json => ({ resourceType: 'Condition', id: `c${i}`, subject: { reference: 'Patient/p1' }, ...(code ? { code } : {}) });
        for (let i = 0; i < 40; i++) await api.put200(condition(i));
        await api.put200(observation('o1', 5.4));
        // The rows as model 17 wrote them: no string row for a Coding's display without a code.
        const stripped = (r: Json): Json => (Array.isArray(r.code?.coding) ? { ...r, code: { ...r.code, coding: r.code.coding.filter((c: Json) => c.code !== undefined) } } : r);
        const page = await t.store.resources.indexing.page(0, 1_000);
        await t.store.resources.write('t1', (w) => w.replaceIndex(page.map((r) => ({ type: r.type, id: r.id, versionId: r.versionId, index: storedIndex(stripped(JSON.parse(r.content))), compartments: [] })), ['search_string']));
        await t.store.resources.indexing.setState({ model: 17, after: 0 });
        rebuilding = { from: 17, examined: 0 };
        const ids = async (q: string) => ((await api.search(q)).entry ?? []).map((e: Json) => e.resource.id).sort();
        const tens = (r: number) => Array.from({ length: 10 }, (_, i) => `c${4 * i + r}`).sort();
        let writes = 0;
        const run = await reindex(t.store, {
          batch: 10,
          pause: {
            everyMs: 0,
            wait: async () => {
              if (writes >= 4) return;
              for (const q of ['Condition?code:text=back', 'Condition?code:missing=true', `Condition?_filter=${encodeURIComponent('code pr false')}`]) expect((await api.get(q)).status).toBe(503);
              expect(await ids('Condition?code=urn:rv|A')).toEqual(tens(1));
              // (Not a string's prefix: model 22 changed the normalised strings it reads.)
              expect(await ids('Patient?family:exact=Chalmers')).toEqual(['p1']);
              // c3 (no code) is given a display without a code, c0 loses its: their rows follow the write.
              if (writes === 2) await api.put200(condition(3, { coding: [{ display: 'Back pain again' }] }));
              if (writes === 3) await api.put200(condition(0, { text: 'Headache' }));
              writes++;
            },
          },
        });
        expect(run).toMatchObject({ ran: true, done: 42 });
        expect(writes).toBe(4);
        rebuilding = undefined;
        expect(await t.store.resources.indexing.state()).toEqual({ model: INDEX_MODEL, after: 0 });
        expect(await ids('Condition?code:text=back')).toEqual([...tens(0).filter((id) => id !== 'c0'), ...tens(2), 'c3'].sort());
        expect(await ids('Condition?code:text=headache')).toEqual(['c0']);
        expect(await ids('Condition?code:missing=true')).toEqual(tens(3).filter((id) => id !== 'c3'));
        expect(await ids('Condition?code:missing=false')).toHaveLength(31);
      } finally {
        await t.close();
      }
    });

    test('from model 0 (rows of every parameter changed): every search waits, reads and writes do not', async () => {
      const t = await createTestApp({ store: await fresh(), rebuilding: () => ({ from: 0, examined: 0 }) });
      try {
        const api = fhirClient(t, await t.token());
        await api.put200({ resourceType: 'Patient', id: 'p1', name: [{ family: 'Chalmers' }] });
        expect((await api.get('Patient/p1')).status).toBe(200);
        expect((await api.get('Patient/p1/_history')).status).toBe(200);
        expect((await api.get('Patient?name=chalmers')).status).toBe(503);
        expect((await api.get('Patient')).status).toBe(503);
        expect((await api.get('Patient/p1/$everything')).status).toBe(503);
        // The export kick-off answers (its job waits for the workers, which start after the rebuild).
        expect((await api.get('$export', { Prefer: 'respond-async', Accept: 'application/fhir+json' })).status).toBe(202);
      } finally {
        await t.close();
      }
    });

    test("a guardian's token (its patient chosen, checked again every few seconds) reads on, and writes beside its Subscription go on, while every search waits", async () => {
      const t = await createTestApp({ store: await fresh(), rebuilding: () => ({ from: 0, examined: 0 }) });
      try {
        const api = fhirClient(t, await t.token());
        await api.put200({ resourceType: 'Patient', id: 'p-ann' });
        await api.put200({ resourceType: 'Patient', id: 'p-cat' });
        await api.put200({ resourceType: 'RelatedPerson', id: 'rp-1', patient: { reference: `${t.fhir()}/Patient/p-ann` } });
        const app = await createClient(t.store, t.clock, { tenant: 't1', grants: ['authorization_code'], redirectUris: ['https://app.example/cb'], scopes: ['launch/patient', 'patient/*.rs', 'user/Subscription.cruds'] });
        const guardian = await createUser(t.store, t.clock, { tenant: 't1', username: 'guardian', password: 'correct horse battery', fhirUser: 'RelatedPerson/rp-1' });
        // A token of the guardian's sign-in (a grant), the child chosen at the picker.
        const token = (await signAccessToken(t.keys, t.clock, t.config.baseUrl, {
          sub: guardian.id, aud: t.fhir(), client_id: app.client.clientId, scope: 'launch/patient patient/*.rs user/Subscription.cruds', tenant: 't1', patient: 'p-ann', gid: 'grant-1', urt: t.clock.now(),
        }, 3600)).token;
        const read = (path: string) => t.request(`${t.fhir()}/${path}`, fhirInit(token));
        expect((await read('Patient/p-ann')).status).toBe(200);
        t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
        expect((await read('Patient/p-ann')).status).toBe(200);
        // Its Subscription, matched on every write of the tenant: the writes answer.
        const sub = await api.create({ resourceType: 'Subscription', status: 'requested', reason: 'guardian', criteria: 'Observation?code:text=x', channel: { type: 'rest-hook', endpoint: 'https://hook.example/g' } });
        const owner = JSON.stringify({ scopes: ['patient/*.rs'], clientId: app.client.clientId, patient: 'p-ann', user: { id: guardian.id, readAt: t.clock.now() } });
        await t.store.resources.write('t1', (w) => w.ownSubscription(sub.id as string, owner, 'rest-hook'));
        t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
        expect((await api.put('Observation/o1', { resourceType: 'Observation', id: 'o1', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/p-ann' } })).status).toBe(201);
        expect((await t.store.subscriptions.pending('t1', sub.id as string, 10)).map((n) => n.id)).toEqual(['o1']);
        // The relationship ends during the rebuild: refused as at any other time (401), not a 503, nor still admitted.
        await api.put200({ resourceType: 'RelatedPerson', id: 'rp-1', patient: { reference: 'Patient/p-cat' } });
        t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
        expect((await read('Patient/p-ann')).status).toBe(401);
        expect((await api.put('Observation/o2', { resourceType: 'Observation', id: 'o2', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/p-ann' } })).status).toBe(201);
        expect((await t.store.subscriptions.pending('t1', sub.id as string, 10)).map((n) => n.id)).toEqual(['o1']);
      } finally {
        await t.close();
      }
    });
  });
});

describe('readsRowsBeingRebuilt', () => {
  const query = (...where: Condition[]) => ({ type: 'Observation', where, sort: [], count: 10 });
  const canonical: Condition = { kind: 'number', param: 'value-quantity:canonical', tests: [{ op: 'eq', value: 1, low: 0.5, high: 1.5, canonical: true }] };
  const plain: Condition = { kind: 'number', param: 'value-quantity', tests: [{ op: 'eq', value: 1, low: 0.5, high: 1.5 }] };
  const text: Condition = { kind: 'text', field: 'content', values: [[{ word: 'final', prefix: false }]] };
  const tokenText: Condition = { kind: 'token-text', param: 'identifier', values: ['mrn'] };
  const near: Condition = { kind: 'near', param: 'near', points: [{ latitude: 1, longitude: 2, km: 3 }] };

  test('names the conditions each later model changed the rows of', () => {
    expect(INDEX_MODEL).toBe(24);
    // Model 24: a canonical resource's `url|version` row and a long versioned canonical's marker: canonical references
    // (a `_revinclude`'s token, a chain, a `_has`) wait; other references, and the rest, do not.
    const named24: Condition = { kind: 'token', param: 'questionnaire', values: [{ system: '', value: 'http://x/Q|1' }], reference: true, canonical: true };
    expect(readsRowsBeingRebuilt(23, query(named24))).toBe(true);
    expect(readsRowsBeingRebuilt(23, query({ kind: 'chain', param: 'questionnaire', targetType: 'Questionnaire', where: [plain], canonical: true }))).toBe(true);
    expect(readsRowsBeingRebuilt(23, query({ kind: 'has', type: 'QuestionnaireResponse', param: 'questionnaire', where: [plain], canonical: true }))).toBe(true);
    // `_filter`'s `ne` on a reference reads the markers too (a long url's versions are equal to it).
    expect(readsRowsBeingRebuilt(23, query({ kind: 'token', param: 'questionnaire', values: [{ system: '', value: 'http://x/Q' }], reference: true, unequal: true }))).toBe(true);
    expect(readsRowsBeingRebuilt(23, query(plain, text, canonical, near, { ...named24, canonical: undefined }, { kind: 'chain', param: 'subject', targetType: 'Patient', where: [plain] }))).toBe(false);
    // (From here on, canonical references wait for model 24 whatever the model before.)
    // Model 23: the full-text words (case folded as strings are): `_text` and `_content` wait, nothing else does.
    expect(readsRowsBeingRebuilt(22, query(text))).toBe(true);
    expect(readsRowsBeingRebuilt(22, query({ kind: 'or', any: [plain, text] }))).toBe(true);
    expect(readsRowsBeingRebuilt(22, query({ kind: 'has', type: 'Observation', param: 'subject', where: [text] }))).toBe(true);
    expect(readsRowsBeingRebuilt(22, query(plain, canonical, near, tokenText, { kind: 'string', param: 'family', values: [{ value: 'soren', match: 'prefix' }] }))).toBe(false);
    expect(readsRowsBeingRebuilt(22, { ...query(), sort: [{ by: 'param', table: 'search_string', param: 'family', descending: false }] })).toBe(false);
    // (From here on, full-text conditions wait for model 23 whatever the model before.)
    // Model 22: normalised strings (letters whose mark does not decompose, ligatures): as model 10's, string
    // values but `:exact`, token `:text`, a composite's string component, in a chain, and a sort on strings.
    const family22: Condition = { kind: 'string', param: 'family', values: [{ value: 'soren', match: 'prefix' }] };
    expect(readsRowsBeingRebuilt(21, query(family22))).toBe(true);
    expect(readsRowsBeingRebuilt(21, query({ ...family22, values: [{ value: 'ore', match: 'contains' }] }))).toBe(true);
    expect(readsRowsBeingRebuilt(21, query(tokenText))).toBe(true);
    expect(readsRowsBeingRebuilt(21, query({ kind: 'composite', param: 'y', tests: [{ value1: 'a', parts: [{ kind: 'string', value: 'b' }] }] }))).toBe(true);
    expect(readsRowsBeingRebuilt(21, query({ kind: 'chain', param: 'subject', targetType: 'Patient', where: [family22] }))).toBe(true);
    expect(readsRowsBeingRebuilt(21, { ...query(), sort: [{ by: 'param', table: 'search_string', param: 'family', descending: false }] })).toBe(true);
    expect(readsRowsBeingRebuilt(21, query({ ...family22, values: [{ value: 'Søren', match: 'exact' }] }, plain, canonical, near))).toBe(false);
    expect(readsRowsBeingRebuilt(21, query({ kind: 'token', param: 'code', values: [{ system: 'urn:cs' }] }))).toBe(false);
    // (From here on, those string conditions wait for model 22 whatever the model before.)
    // Model 21: the canonical rows and sort keys of a UCUM unit with a leading `/` or an annotated number: as model 20's.
    expect(readsRowsBeingRebuilt(20, query(canonical))).toBe(true);
    expect(readsRowsBeingRebuilt(20, query({ kind: 'composite', param: 'component-value-quantity:canonical', tests: [] }))).toBe(true);
    expect(readsRowsBeingRebuilt(20, { ...query(), sort: [{ by: 'param', table: 'search_range', param: sortParam('value-quantity'), descending: false }] })).toBe(true);
    expect(readsRowsBeingRebuilt(20, query(plain, near, { kind: 'token', param: 'code', values: [{ system: 'urn:cs' }] }))).toBe(false);
    // Model 20: a UCUM quantity of any atom of the essence, canonical rows and sort keys: conditions on canonical
    // rows (a UCUM unit's search, a composite's too) and a quantity sort; not the rows as written, nor others.
    expect(readsRowsBeingRebuilt(19, query(canonical))).toBe(true);
    expect(readsRowsBeingRebuilt(19, query({ kind: 'composite', param: 'component-value-quantity:canonical', tests: [] }))).toBe(true);
    expect(readsRowsBeingRebuilt(19, { ...query(), sort: [{ by: 'param', table: 'search_range', param: sortParam('value-quantity'), descending: false }] })).toBe(true);
    expect(readsRowsBeingRebuilt(19, query(plain, near, { kind: 'token', param: 'code', values: [{ system: 'urn:cs' }] }))).toBe(false);
    // (From here on, a condition on canonical rows waits for model 20 whatever the model before.)
    // Model 19: a Coding, Identifier or ContactPoint with a system alone as a token row of its system:
    // token conditions on a system alone (in a chain too), `_filter`'s `ne`, `:missing` on tokens and
    // `:text` (whose display such a row now carries); not a code, nor the other tables' conditions.
    const system19: Condition = { kind: 'token', param: 'code', values: [{ system: 'urn:cs' }] };
    expect(readsRowsBeingRebuilt(18, query(system19))).toBe(true);
    expect(readsRowsBeingRebuilt(18, query({ ...system19, not: true }))).toBe(true);
    expect(readsRowsBeingRebuilt(18, query({ kind: 'chain', param: 'subject', targetType: 'Patient', where: [{ ...system19, param: 'identifier' }] }))).toBe(true);
    expect(readsRowsBeingRebuilt(18, query({ kind: 'token', param: 'code', values: [{ system: 'urn:cs', value: 'x' }], unequal: true }))).toBe(true);
    expect(readsRowsBeingRebuilt(18, query({ kind: 'missing', table: 'search_index', params: ['code'], missing: true }))).toBe(true);
    expect(readsRowsBeingRebuilt(18, query(tokenText))).toBe(true);
    expect(readsRowsBeingRebuilt(18, { ...query(), sort: [{ by: 'param', table: 'search_index', param: 'code', descending: false }] })).toBe(true);
    expect(readsRowsBeingRebuilt(18, query(plain, near, { kind: 'token', param: 'code', values: [{ system: 'urn:cs', value: 'x' }] }))).toBe(false);
    // Model 18: a Coding's display without a code as a string row of `:text`: token `:text` (its string
    // half) and a token's `:missing` (which counts those rows), in a chain too.
    const text18: Condition = { kind: 'string', param: 'code:text', values: [{ value: 'headache', match: 'contains' }] };
    const missing18: Condition = { kind: 'missing', table: 'search_string', params: ['code:text'], missing: true };
    expect(readsRowsBeingRebuilt(17, query(text18))).toBe(true);
    expect(readsRowsBeingRebuilt(17, query(missing18))).toBe(true);
    expect(readsRowsBeingRebuilt(17, query({ kind: 'chain', param: 'subject', targetType: 'Patient', where: [text18] }))).toBe(true);
    expect(readsRowsBeingRebuilt(17, query(plain, near, { kind: 'string', param: 'family', values: [{ value: 'x', match: 'exact' }] }))).toBe(false);
    // Model 17: email addresses lower-cased in token rows: token conditions on contact point parameters alone.
    const email17: Condition = { kind: 'token', param: 'email', values: [{ value: 'a@b.c' }] };
    expect(readsRowsBeingRebuilt(16, query(email17))).toBe(true);
    expect(readsRowsBeingRebuilt(16, query({ kind: 'chain', param: 'subject', targetType: 'Patient', where: [{ ...email17, param: 'telecom' }] }))).toBe(true);
    expect(readsRowsBeingRebuilt(16, query(plain, near, { kind: 'token', param: 'code', values: [{ value: '1-8' }] }))).toBe(false);
    // Model 16: a quantity's sort rows: a sort on a quantity parameter alone, no condition.
    const byQuantity = { ...query(plain, canonical, tokenText, near, text), sort: [{ by: 'param' as const, table: 'search_range' as const, param: 'value-quantity:sort', descending: true }] };
    expect(readsRowsBeingRebuilt(15, byQuantity)).toBe(true);
    expect(readsRowsBeingRebuilt(15, query(plain, near))).toBe(false);
    expect(readsRowsBeingRebuilt(15, query(email17))).toBe(true);
    // Model 15: the `exact` column of string rows (composed, NFC): `:exact` alone, in a chain too.
    const exact15: Condition = { kind: 'string', param: 'family', values: [{ value: 'Zo\u00e9', match: 'exact' }] };
    expect(readsRowsBeingRebuilt(14, query(exact15))).toBe(true);
    expect(readsRowsBeingRebuilt(14, query({ kind: 'chain', param: 'subject', targetType: 'Patient', where: [exact15] }))).toBe(true);
    expect(readsRowsBeingRebuilt(14, query(plain, near))).toBe(false);
    // Model 14: number and quantity rows (a Quantity with a comparator, a range): number and quantity
    // conditions, canonical ones, a composite's quantity part, in a chain.
    const codeQuantity: Condition = { kind: 'composite', param: 'code-value-quantity', tests: [{ value1: 'a', parts: [{ kind: 'number', column: 'both', test: { op: 'gt', value: 1, low: 0.5, high: 1.5 } }] }] };
    expect(readsRowsBeingRebuilt(13, query(plain))).toBe(true);
    expect(readsRowsBeingRebuilt(13, query(canonical))).toBe(true);
    expect(readsRowsBeingRebuilt(13, query(codeQuantity))).toBe(true);
    expect(readsRowsBeingRebuilt(13, query({ kind: 'chain', param: 'subject', targetType: 'Patient', where: [plain] }))).toBe(true);
    expect(readsRowsBeingRebuilt(13, query(near, { kind: 'date', param: 'date', tests: [{ op: 'eq', low: 0, high: 1 }] }))).toBe(false);
    // Model 11: token rows' displays: token `:text` alone (in a chain too).
    const family11: Condition = { kind: 'missing', table: 'search_string', params: ['family'], missing: true };
    expect(readsRowsBeingRebuilt(10, query(tokenText))).toBe(true);
    expect(readsRowsBeingRebuilt(10, query({ kind: 'chain', param: 'subject', targetType: 'Patient', where: [tokenText] }))).toBe(true);
    expect(readsRowsBeingRebuilt(10, query(family11, near))).toBe(false);
    expect(readsRowsBeingRebuilt(10, query({ kind: 'token', param: 'code', values: [{ value: '1-8' }] }))).toBe(false);
    expect(readsRowsBeingRebuilt(10, query({ kind: 'missing', table: 'search_range', params: ['date'], missing: true }))).toBe(false);
    // Model 13: date rows (a leap second): date conditions, in a chain too.
    const date13: Condition = { kind: 'date', param: 'date', tests: [{ op: 'eq', low: 0, high: 1 }] };
    expect(readsRowsBeingRebuilt(12, query(date13))).toBe(true);
    expect(readsRowsBeingRebuilt(12, query({ kind: 'chain', param: 'subject', targetType: 'Patient', where: [{ ...date13, param: 'birthdate' }] }))).toBe(true);
    expect(readsRowsBeingRebuilt(12, query(family11, near))).toBe(false);
    expect(readsRowsBeingRebuilt(12, query({ kind: 'lastUpdated', tests: [{ op: 'ge', low: 0, high: 1 }] }))).toBe(false);
    // Model 10: normalised strings (full case folding): string values but `:exact`, token `:text`, a
    // composite's string component, in a chain, under `_has`, in an `or`.
    const family: Condition = { kind: 'string', param: 'family', values: [{ value: 'strasse', match: 'prefix' }] };
    const exact: Condition = { kind: 'string', param: 'family', values: [{ value: 'Straße', match: 'exact' }] };
    const codeStr: Condition = { kind: 'composite', param: 'y', tests: [{ value1: 'a', parts: [{ kind: 'string', value: 'b' }] }] };
    const codeTok: Condition = { kind: 'composite', param: 'z', tests: [{ value1: 'a', parts: [{ kind: 'token', value: 'b' }] }] };
    expect(readsRowsBeingRebuilt(9, query(family))).toBe(true);
    expect(readsRowsBeingRebuilt(9, query({ ...family, values: [{ value: 'ss', match: 'contains' }] }))).toBe(true);
    expect(readsRowsBeingRebuilt(9, query(tokenText))).toBe(true);
    expect(readsRowsBeingRebuilt(9, query(codeStr))).toBe(true);
    expect(readsRowsBeingRebuilt(9, query({ kind: 'chain', param: 'subject', targetType: 'Patient', where: [family] }))).toBe(true);
    expect(readsRowsBeingRebuilt(9, query({ kind: 'has', type: 'Observation', param: 'subject', where: [{ kind: 'not', condition: family }] }))).toBe(true);
    expect(readsRowsBeingRebuilt(9, query(codeTok, near))).toBe(false);
    // (`:exact` waits from model 14: model 15 composed the text it compares.)
    expect(readsRowsBeingRebuilt(9, query(exact))).toBe(true);
    // (Date conditions wait from model 12: model 13 changed date rows.)
    expect(readsRowsBeingRebuilt(9, query({ kind: 'date', param: 'date', tests: [{ op: 'eq', low: 0, high: 1 }] }))).toBe(true);
    expect(readsRowsBeingRebuilt(9, query({ kind: 'missing', table: 'search_string', params: ['family'], missing: true }))).toBe(false);
    expect(readsRowsBeingRebuilt(9, { ...query(codeTok), compartment: 'p1' })).toBe(false);
    // Model 9: date ranges, directly, in a composite with a date component, in a chain.
    const date: Condition = { kind: 'date', param: 'date', tests: [{ op: 'eq', low: 0, high: 1 }] };
    const codeDate: Condition = { kind: 'composite', param: 'x', tests: [{ value1: 'a', parts: [{ kind: 'date', test: { op: 'eq', low: 0, high: 1 } }] }] };
    const codeString: Condition = { kind: 'composite', param: 'y', tests: [{ value1: 'a', parts: [{ kind: 'string', value: 'b' }] }] };
    expect(readsRowsBeingRebuilt(8, query(date))).toBe(true);
    expect(readsRowsBeingRebuilt(8, query(codeDate))).toBe(true);
    expect(readsRowsBeingRebuilt(8, query({ kind: 'chain', param: 'subject', targetType: 'Patient', where: [{ ...date, param: 'birthdate' }] }))).toBe(true);
    expect(readsRowsBeingRebuilt(8, query(near))).toBe(false);
    expect(readsRowsBeingRebuilt(8, query(codeString))).toBe(true);
    expect(readsRowsBeingRebuilt(8, query({ kind: 'lastUpdated', tests: [{ op: 'ge', low: 0, high: 1 }] }))).toBe(false);
    expect(readsRowsBeingRebuilt(8, query({ kind: 'missing', table: 'search_range', params: ['date'], missing: true }))).toBe(false);
    expect(readsRowsBeingRebuilt(8, { ...query(near), compartment: 'p1' })).toBe(false);
    // Model 8: reference rows (another server's URL) and compartments.
    const subject: Condition = { kind: 'token', param: 'subject', values: [{ system: 'Patient', value: 'p1' }], reference: true };
    const code: Condition = { kind: 'token', param: 'code', values: [{ system: 'http://loinc.org', value: '1-8' }] };
    expect(readsRowsBeingRebuilt(7, query(subject))).toBe(true);
    expect(readsRowsBeingRebuilt(7, query({ ...subject, not: true }))).toBe(true);
    expect(readsRowsBeingRebuilt(7, query(code, { kind: 'has', type: 'Provenance', param: 'target', where: [code] }))).toBe(true);
    expect(readsRowsBeingRebuilt(7, query({ kind: 'missing', table: 'search_index', params: ['subject'], missing: true }))).toBe(true);
    expect(readsRowsBeingRebuilt(7, { ...query(code), compartment: 'p1' })).toBe(true);
    expect(readsRowsBeingRebuilt(7, query(code, near))).toBe(false);
    expect(readsRowsBeingRebuilt(7, query(date))).toBe(true);
    expect(readsRowsBeingRebuilt(7, query({ kind: 'missing', table: 'search_range', params: ['near'], missing: true }))).toBe(false);
    // Model 7: the same kinds of rows, of AuditEvents and EpisodeOfCares.
    expect(readsRowsBeingRebuilt(6, { type: 'AuditEvent', where: [{ kind: 'string', param: 'patient:Patient.name', values: [{ value: 'x', match: 'prefix' }] }], sort: [], count: 10 })).toBe(true);
    expect(readsRowsBeingRebuilt(6, { type: 'AuditEvent', where: [{ kind: 'token', param: 'action', values: [{ value: 'x' }] }], sort: [], count: 10 })).toBe(false);
    // Model 6: rows of contained resources (prefixed parameters) and references to them (`:missing`).
    const name: Condition = { kind: 'string', param: 'name', values: [{ value: 'x', match: 'prefix' }] };
    // (A chain into the target's own rows waits for model 8, which changed the reference rows it reads.)
    expect(readsRowsBeingRebuilt(5, query({ kind: 'chain', param: 'subject', targetType: 'Patient', where: [name] }))).toBe(true);
    expect(readsRowsBeingRebuilt(5, query({ kind: 'or', any: [
      { kind: 'chain', param: 'subject', targetType: 'Patient', where: [name] }, { ...name, param: 'subject:Patient.name' },
    ] }))).toBe(true);
    expect(readsRowsBeingRebuilt(5, query({ kind: 'chain', param: 'subject:Patient.organization', targetType: 'Organization', where: [name] }))).toBe(true);
    expect(readsRowsBeingRebuilt(5, query({ kind: 'missing', table: 'search_index', params: ['subject'], missing: true }))).toBe(true);
    expect(readsRowsBeingRebuilt(5, query({ kind: 'missing', table: 'search_range', params: ['near'], missing: true }))).toBe(false);
    expect(readsRowsBeingRebuilt(5, query(near))).toBe(false);
    // (A plain quantity waits from any older model: model 14 changed its rows.)
    expect(readsRowsBeingRebuilt(4, query(plain))).toBe(true);
    expect(readsRowsBeingRebuilt(4, query(canonical))).toBe(true);
    expect(readsRowsBeingRebuilt(4, query(plain, { kind: 'not', condition: { kind: 'or', any: [plain, canonical] } }))).toBe(true);
    expect(readsRowsBeingRebuilt(4, query({ kind: 'chain', param: 'subject', targetType: 'Patient', where: [{ kind: 'and', all: [canonical] }] }))).toBe(true);
    expect(readsRowsBeingRebuilt(4, query(near))).toBe(false);
    expect(readsRowsBeingRebuilt(3, query(near))).toBe(true);
    expect(readsRowsBeingRebuilt(3, query({ kind: 'missing', table: 'search_range', params: ['near'], missing: true }))).toBe(true);
    expect(readsRowsBeingRebuilt(3, query(text))).toBe(true);
    expect(readsRowsBeingRebuilt(2, query(tokenText))).toBe(true);
    expect(readsRowsBeingRebuilt(2, query(text))).toBe(true);
    expect(readsRowsBeingRebuilt(1, query(text))).toBe(true);
    expect(readsRowsBeingRebuilt(1, query({ kind: 'token', param: 'code', values: [{ value: '1-8' }] }))).toBe(false);
    expect(readsRowsBeingRebuilt(0, query())).toBe(true);
    expect(readsRowsBeingRebuilt(0, query(plain))).toBe(true);
  });
});

const ROOT = resolve(import.meta.dir, '../..');
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('cinder serve on a database of an older index model', () => {
  test('listens before its reindex ends, and searches find the rebuilt rows after it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cinder-reindex-serve-'));
    dirs.push(dir);
    const data = join(dir, 'data');
    const port = (() => {
      const probe = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response() });
      const p = probe.port!;
      probe.stop(true);
      return p;
    })();
    const env = {
      PATH: process.env.PATH ?? '', HOME: dir, CINDER_PORT: String(port), CINDER_HOST: '127.0.0.1', CINDER_BASE_URL: `http://127.0.0.1:${port}`,
      CINDER_DATA_DIR: data, CINDER_LOG_LEVEL: 'info',
    };
    const cli = async (...args: string[]) => {
      const p = Bun.spawn([process.execPath, join(ROOT, 'src/main.ts'), ...args], { env, stdout: 'pipe', stderr: 'pipe' });
      const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
      if (code !== 0) throw new Error(`cinder ${args.join(' ')}: ${code} ${out} ${err}`);
      return out;
    };
    await cli('migrate'); // as an operator starts: the other commands make no database
    await cli('tenant', 'create', 't1');
    const client = JSON.parse(await cli('client', 'create', '--tenant', 't1', '--scope', 'system/*.*', '--json')) as Json;
    // 3,000 Observations in mg, imported at the current model; then as model 4 wrote them: no canonical rows.
    const file = join(dir, 'o.ndjson');
    await Bun.write(file, Array.from({ length: 3_000 }, (_, i) => JSON.stringify(observation(`o${i}`, i))).join('\n') + '\n');
    await cli('import', '--tenant', 't1', file);
    const db = createSqliteStore(join(data, 'cinder.db'));
    const page = await db.resources.indexing.page(0, 10_000);
    expect(page.length).toBe(3_000);
    await db.resources.write('t1', (w) => w.replaceIndex(page.map((r) => {
      const index = storedIndex(JSON.parse(r.content));
      index.ranges = index.ranges.filter((e) => !e.param.endsWith(canonicalParam('')));
      return { type: r.type, id: r.id, index, compartments: [] };
    }), ['search_range']));
    expect(await db.resources.count('t1', { type: 'Observation', where: [{ kind: 'number', param: canonicalParam('value-quantity'), tests: [{ op: 'ge', value: 0, low: 0, high: 0 }] }], sort: [], count: 0 })).toBe(0);
    await db.resources.indexing.setState({ model: 4, after: 0 });
    await db.close();

    const server = Bun.spawn([process.execPath, join(ROOT, 'src/main.ts'), 'serve'], { env, stdin: 'ignore', stdout: 'ignore', stderr: 'pipe' });
    let log = '';
    const reading = (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of server.stderr) log += decoder.decode(chunk);
    })();
    try {
      expect(await eventually(() => log.includes('"search index rebuilt"'), 30_000)).toBe(true);
      const lines = log.split('\n');
      const at = (msg: string) => lines.findIndex((l) => l.includes(`"msg":"${msg}"`));
      expect(at('listening')).toBeGreaterThanOrEqual(0);
      expect(at('rebuilding search index beside the server')).toBeGreaterThan(at('listening'));
      expect(at('search index rebuilt')).toBeGreaterThan(at('listening'));
      expect(JSON.parse(lines[at('search index rebuilt')]!)).toMatchObject({ resources: 3_000, examined: 3_000 });

      const base = `http://127.0.0.1:${port}`;
      const token = ((await (await fetch(`${base}/oauth2/token`, {
        method: 'POST', headers: { Authorization: 'Basic ' + btoa(`${client.client_id}:${client.client_secret}`) },
        body: new URLSearchParams({ grant_type: 'client_credentials' }),
      })).json()) as Json).access_token as string;
      const res = await fetch(`${base}/tenants/t1/fhir/R4/Observation?value-quantity=ge2.5|${UCUM}|g&_summary=count`, { headers: { Authorization: `Bearer ${token}` } });
      expect(res.status).toBe(200);
      expect(((await res.json()) as Json).total).toBe(500);
      expect(await (await fetch(`${base}/readyz`)).json()).not.toHaveProperty('searchIndex');
    } finally {
      server.kill('SIGTERM');
      await server.exited;
      await reading;
    }
  }, 90_000);
});
