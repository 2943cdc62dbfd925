/**
 * A `_typeFilter` query holding a parameter with no value (`Observation?category=`): a search ignores it (R4
 * search.html), which in an export exported every resource of the type the parameter was to leave out. It is a 400
 * naming `_typeFilter`, as a scope filter holding one is refused; with lenient handling it is left out of the query
 * with a warning. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { download, eachStore, finish, kickOff, refs } from '../helpers/export.ts';
import { fhirClient, type Json } from '../helpers/fhir.ts';

const CAT = 'http://terminology.hl7.org/CodeSystem/observation-category';
const obs = (id: string, category: string, status = 'final'): Json => ({
  resourceType: 'Observation', id, status, subject: { reference: 'Patient/p1' },
  category: [{ coding: [{ system: CAT, code: category }] }], code: { text: id },
});
const enc = encodeURIComponent;

await eachStore((kind, fresh) => {
  describe(`_typeFilter parameters with no value (${kind})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      const admin = fhirClient(t, await t.token());
      await admin.put200({ resourceType: 'Patient', id: 'p1' });
      for (const o of [obs('lab1', 'laboratory'), obs('lab2', 'laboratory', 'preliminary'), obs('vs1', 'vital-signs')]) await admin.put200(o);
    });
    afterAll(() => t.close());
    // A client of its own for each kick-off: the exports of one are limited.
    const token = async () => {
      const c = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/*.*'] });
      return t.token(undefined, c.client.clientId, c.clientSecret!);
    };

    test('is a 400 naming _typeFilter and the parameter, never an export of what it was to leave out', async () => {
      for (const q of ['Observation?category=', 'Observation?category=laboratory&status=', 'Observation?_id=', 'Observation?_filter=', 'Observation?code:text=', 'Observation?subject:Patient.name=']) {
        const res = await t.request(`${t.fhir()}/$export?_type=Observation&_typeFilter=${enc(q)}`, fhirInit(await token(), 'GET', undefined, { Prefer: 'respond-async' }));
        expect([q, res.status]).toEqual([q, 400]);
        const body = (await res.json()) as { issue: { details: { text: string }; expression: string[] }[] };
        expect(body.issue[0]!.details.text).toContain(`_typeFilter '${q}': the parameter '${q.split('&').at(-1)!.split('?').at(-1)!.slice(0, -1)}' has no value`);
        expect(body.issue[0]!.expression).toEqual(['_typeFilter']);
      }
    });

    test('with handling=lenient the parameter is left out of its query, the rest applied, and a warning says so', async () => {
      const tok = await token();
      const status = await kickOff(t, tok, `/$export?_type=Observation&_typeFilter=${enc('Observation?category=laboratory&status=')}`, { Prefer: 'handling=lenient' });
      const manifest = await finish(t, tok, status);
      expect(refs(await download(t, tok, manifest.output))).toEqual(['Observation/lab1', 'Observation/lab2']);
      expect(JSON.stringify(await download(t, tok, manifest.error))).toContain("the parameter 'status' has no value");
    });
  });
});
