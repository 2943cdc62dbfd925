/**
 * Values longer than PostgreSQL's index entries hold (a B-tree entry holds at most 2,704 bytes): a token,
 * reference or uri value, a system or a unit of more than 2,000 bytes is indexed there in its bounded
 * form (its first 1,900 bytes and the SHA-256 of the whole, src/store/index-limits.ts), and searches
 * compare bounded forms. On both databases such a resource is stored, and every search finds it as it
 * finds a short one: exact values, a value differing only past the kept bytes, `:not`, `:below` and
 * `:above` on uris, chains, `_has`, quantities, composites, conditional creates, transactions, batches
 * and `_typeFilter`. A `:below` value past 1,897 bytes is refused on both.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { download, eachStore, finish, kickOff, refs } from '../helpers/export.ts';
import { expectOutcome, ids, type Json } from '../helpers/fhir.ts';

/** `n` pseudo-random lower-case letters: text that does not compress. */
function letters(n: number, seed = 11): string {
  let s = seed;
  return Array.from({ length: n }, () => String.fromCharCode(97 + ((s = (s * 1103515245 + 12345) & 0x7fffffff) % 26))).join('');
}

const MRN = 'http://example.org/mrn';
const CS = 'http://example.org/cs';
const enc = encodeURIComponent;

await eachStore((kind, fresh) => {
  describe(`values longer than the index holds (${kind})`, () => {
    let t: TestApp;
    let token: string;
    let fhir: string;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      fhir = t.fhir();
    });
    afterAll(() => t.close());

    const post = (body: unknown, path = '', headers: Record<string, string> = {}) => t.request(`${fhir}${path}`, fhirInit(token, 'POST', body, headers));
    const created = async (resource: Json): Promise<string> => {
      const res = await post(resource, `/${resource.resourceType}`);
      expect(res.status).toBe(201);
      return ((await res.json()) as Json).id;
    };
    const search = async (query: string): Promise<string[]> => {
      const res = await t.request(`${fhir}/${query}`, fhirInit(token));
      expect(res.status).toBe(200);
      return ids((await res.json()) as Json).sort();
    };

    test('a value of 2,000 bytes and longer ones are stored and found by their whole value', async () => {
      const cases: [Json, string][] = [
        [{ resourceType: 'Patient', identifier: [{ system: MRN, value: letters(2000) }] }, `Patient?identifier=${MRN}|${letters(2000)}`],
        [{ resourceType: 'Patient', identifier: [{ system: MRN, value: letters(2001, 1) }] }, `Patient?identifier=${MRN}|${letters(2001, 1)}`],
        [{ resourceType: 'Patient', identifier: [{ system: `http://example.org/${letters(2100, 2)}`, value: 'v' }] }, `Patient?identifier=http://example.org/${letters(2100, 2)}|v`],
        [{ resourceType: 'Patient', identifier: [{ system: `http://example.org/${letters(2100, 2)}`, value: 'w' }] }, `Patient?identifier=http://example.org/${letters(2100, 2)}|w`],
        [{ resourceType: 'Observation', status: 'final', code: { coding: [{ system: CS, code: letters(3000, 3) }] } }, `Observation?code=${CS}|${letters(3000, 3)}`],
        [{ resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: `http://example.org/fhir/Patient/${letters(2100, 4)}` } }, `Observation?subject=http://example.org/fhir/Patient/${letters(2100, 4)}`],
        [{ resourceType: 'ValueSet', status: 'active', url: `http://example.org/${letters(2100, 5)}` }, `ValueSet?url=http://example.org/${letters(2100, 5)}`],
        [{ resourceType: 'Patient', meta: { tag: [{ system: 'http://example.org/tags', code: letters(2100, 6) }] } }, `Patient?_tag=http://example.org/tags|${letters(2100, 6)}`],
      ];
      for (const [resource, query] of cases) {
        const id = await created(resource);
        expect(await search(query)).toEqual([id]);
      }
      // The system alone (`system|`) finds both identifiers under the long system.
      expect((await search(`Patient?identifier=http://example.org/${letters(2100, 2)}|`)).length).toBe(2);
    });

    test('values alike in their first 2,500 characters are told apart, and :not excludes only its own', async () => {
      const stem = letters(2500, 8);
      const x = await created({ resourceType: 'Patient', identifier: [{ system: MRN, value: `${stem}x` }] });
      const y = await created({ resourceType: 'Patient', identifier: [{ system: MRN, value: `${stem}y` }] });
      expect(await search(`Patient?identifier=${MRN}|${stem}x`)).toEqual([x]);
      expect(await search(`Patient?identifier=${MRN}|${stem}y`)).toEqual([y]);
      expect(await search(`Patient?identifier=${MRN}|${stem}`)).toEqual([]);
      expect(await search(`Patient?identifier=${MRN}|${stem}x,${MRN}|${stem}y`)).toEqual([x, y].sort());
      const not = await search(`Patient?identifier:not=${MRN}|${stem}x&_count=1000`);
      expect(not).toContain(y);
      expect(not).not.toContain(x);
    });

    test(':below and :above on a long uri; a :below value past 1,897 bytes is refused naming the parameter', async () => {
      // 1,898 bytes, then a three-byte character across the 1,900th: the bounded form keeps 1,898 bytes.
      const url = `http://example.org/${'a'.repeat(1879)}€${letters(400, 9)}`;
      const id = await created({ resourceType: 'ValueSet', status: 'active', url });
      const prefix = (bytes: number) => Buffer.from(url).subarray(0, bytes).toString();
      expect(await search(`ValueSet?url:below=${enc('http://example.org/')}&_count=1000`)).toContain(id);
      expect(await search(`ValueSet?url:below=${enc(prefix(1897))}`)).toEqual([id]);
      expect(await search(`ValueSet?url:below=${enc(`${prefix(1896)}b`)}`)).toEqual([]);
      const refused = await t.request(`${fhir}/ValueSet?url:below=${enc(prefix(1898))}`, fhirInit(token));
      const issue = (await expectOutcome(refused, 400)).issue[0] as Json;
      expect(issue.diagnostics).toBe("A ':below' value of 'url:below' holds at most 1897 bytes (this one 1898)");
      expect(issue.expression).toEqual(['url:below']);
      // :above: every prefix at a `/`, the long url itself included.
      expect(await search(`ValueSet?url:above=${enc(`${url}/more/parts`)}`)).toEqual([id]);
    });

    test(':below on a long canonical: the url alone finds its versions; with a version, past 1,896 bytes it is refused', async () => {
      const canonical = `http://example.org/q/${letters(2400, 10)}`;
      const response = (questionnaire: string) => ({ resourceType: 'QuestionnaireResponse', status: 'completed', questionnaire });
      const id = await created(response(`${canonical}|1.2`));
      const short = await created(response('http://example.org/q/short|1.2'));
      expect(await search(`QuestionnaireResponse?questionnaire:below=${enc(canonical)}`)).toEqual([id]);
      expect(await search(`QuestionnaireResponse?questionnaire=${enc(`${canonical}|1.2`)}`)).toEqual([id]);
      expect(await search(`QuestionnaireResponse?questionnaire:below=${enc('http://example.org/q/short|1')}`)).toEqual([short]);
      const refused = await t.request(`${fhir}/QuestionnaireResponse?questionnaire:below=${enc(`${canonical}|1`)}`, fhirInit(token));
      const issue = (await expectOutcome(refused, 400)).issue[0] as Json;
      expect(issue.diagnostics).toBe(`A ':below' value of 'questionnaire:below' holds at most 1896 bytes (this one ${canonical.length + 2})`);
    });

    test('chains, _has, quantities and composites compare long values', async () => {
      const mrn = letters(2300, 12);
      const code = letters(2300, 13);
      const unit = letters(2300, 14);
      const patient = await created({ resourceType: 'Patient', identifier: [{ system: MRN, value: mrn }] });
      const observation = await created({
        resourceType: 'Observation', status: 'final', subject: { reference: `Patient/${patient}` },
        code: { coding: [{ system: CS, code }] }, valueQuantity: { value: 5, system: 'http://example.org/units', code: unit },
      });
      expect(await search(`Observation?subject:Patient.identifier=${MRN}|${mrn}`)).toEqual([observation]);
      expect(await search(`Patient?_has:Observation:subject:code=${CS}|${code}`)).toEqual([patient]);
      expect(await search(`Observation?value-quantity=5|http://example.org/units|${unit}`)).toEqual([observation]);
      expect(await search(`Observation?value-quantity=5|http://example.org/units|${unit}x`)).toEqual([]);
      expect(await search(`Observation?code-value-quantity=${CS}|${code}$5`)).toEqual([observation]);
      expect(await search(`Observation?code-value-quantity=${CS}|${code}$6`)).toEqual([]);
    });

    test('conditional creates, transactions, batches and _typeFilter with long values', async () => {
      const value = letters(2600, 15);
      const body = { resourceType: 'Patient', identifier: [{ system: MRN, value }] };
      const ifNoneExist = { 'If-None-Exist': `identifier=${MRN}|${value}` };
      const first = await post(body, '/Patient', ifNoneExist);
      expect(first.status).toBe(201);
      const again = await post(body, '/Patient', ifNoneExist);
      expect(again.status).toBe(200);
      expect(((await again.json()) as Json).id).toBe(((await first.json()) as Json).id);

      const long = (seed: number) => ({ resourceType: 'Patient', identifier: [{ system: MRN, value: letters(2500, seed) }] });
      const entries = (seed: number) => [long(seed), { resourceType: 'Patient', active: true }].map((resource) => ({ resource, request: { method: 'POST', url: 'Patient' } }));
      const transaction = await post({ resourceType: 'Bundle', type: 'transaction', entry: entries(16) });
      expect(transaction.status).toBe(200);
      const batch = await post({ resourceType: 'Bundle', type: 'batch', entry: entries(17) });
      expect((((await batch.json()) as Json).entry as Json[]).map((e) => e.response.status)).toEqual(['201 Created', '201 Created']);
      const inTransaction = await search(`Patient?identifier=${MRN}|${letters(2500, 16)}`);
      expect(inTransaction.length).toBe(1);
      expect((await search(`Patient?identifier=${MRN}|${letters(2500, 17)}`)).length).toBe(1);

      const status = await kickOff(t, token, `/$export?_type=Patient&_typeFilter=${enc(`Patient?identifier=${MRN}|${letters(2500, 16)}`)}`);
      expect(refs(await download(t, token, (await finish(t, token, status)).output))).toEqual([`Patient/${inTransaction[0]}`]);
    });
  });
});
