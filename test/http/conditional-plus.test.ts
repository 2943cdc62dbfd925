/**
 * A `+` in a search or a condition is read as x-www-form-urlencoded reads it, a space, whichever way the query
 * arrives: a GET search, a POST `_search` form, `If-None-Exist`, a conditional update's URL, and a Bundle entry's
 * `ifNoneExist` and `request.url`; so the same condition string selects the same resources everywhere. A plus is
 * written `%2B`; a date's time zone whose `+` was left unencoded (` 01:00`) is read as `+01:00` everywhere alike.
 * A condition that so reads a plus as a space and creates is refused (its resource misses it), not a duplicate.
 * On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectOutcome, fhirClient, ids, type FhirClient, type Json } from '../helpers/fhir.ts';

const observation = (code: string): Json => ({
  resourceType: 'Observation', status: 'final', code: { coding: [{ system: 'urn:c', code }] }, effectiveDateTime: '2020-01-01T00:00:00+01:00',
});
const patient = (value: string): Json => ({ resourceType: 'Patient', identifier: [{ system: 'urn:p', value }], telecom: [{ system: 'phone', value: '+1-555-0100' }] });
const bundle = (entry: Json[]) => ({ resourceType: 'Bundle', type: 'transaction', entry });
const idOf = (location: string) => location.split('/_history/')[0]!.split('/').pop();

await eachStore((kind, fresh) => {
  describe(`a '+' in a search or a condition (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    /** The ids `condition` selects of `type`, by each way a query reaches the server that selects without writing. */
    const selected = async (type: string, condition: string) => ({
      get: ids(await api.search(`${type}?${condition}`)).sort(),
      form: ids((await (await api.call('POST', `${type}/_search`, condition, { 'Content-Type': 'application/x-www-form-urlencoded' })).json()) as Json).sort(),
    });

    /** The status and id of a conditional create of `resource` by `condition`, through If-None-Exist and a transaction's ifNoneExist. */
    const creates = async (resource: Json, condition: string) => {
      const rest = await api.post(resource.resourceType, resource, { 'If-None-Exist': condition });
      const restBody = (await rest.json()) as Json;
      const tx = await api.post('', bundle([{ request: { method: 'POST', url: resource.resourceType, ifNoneExist: condition }, resource }]));
      const txBody = (await tx.json()) as Json;
      return {
        rest: [rest.status, restBody.id],
        tx: tx.status === 200 ? [Number(txBody.entry[0].response.status.slice(0, 3)), idOf(txBody.entry[0].response.location)] : [tx.status, undefined],
      };
    };

    /** The status and id of a conditional update of `resource` by `condition`, in REST and as a transaction's entry. */
    const updates = async (resource: Json, condition: string) => {
      const type = resource.resourceType as string;
      const rest = await api.put(`${type}?${condition}`, resource);
      const restBody = (await rest.json()) as Json;
      const tx = await api.post('', bundle([{ request: { method: 'PUT', url: `${type}?${condition}` }, resource }]));
      const txBody = (await tx.json()) as Json;
      return {
        rest: [rest.status, restBody.id],
        tx: tx.status === 200 ? [Number(txBody.entry[0].response.status.slice(0, 3)), idOf(txBody.entry[0].response.location)] : [tx.status, undefined],
      };
    };

    test("a date's time zone selects the same resource whether its '+' is encoded or not, everywhere", async () => {
      const stored = await api.create(observation('zone'));
      for (const condition of ['code=urn:c|zone&date=2020-01-01T00:00:00+01:00', 'code=urn:c|zone&date=2020-01-01T00:00:00%2B01:00']) {
        expect(await selected('Observation', condition)).toEqual({ get: [stored.id], form: [stored.id] });
        expect(await creates(observation('zone'), condition)).toEqual({ rest: [200, stored.id], tx: [200, stored.id] });
        expect(await updates(observation('zone'), condition)).toEqual({ rest: [200, stored.id], tx: [200, stored.id] });
      }
      // The zone is read, not dropped: an hour later in UTC is another instant.
      expect(await selected('Observation', 'code=urn:c|zone&date=2020-01-01T00:00:00Z')).toEqual({ get: [], form: [] });
    });

    test("an encoded '+' of a phone number selects it everywhere; an unencoded one is a space everywhere, and a create by it is refused", async () => {
      const stored = await api.create(patient('phone'));
      const encoded = 'identifier=urn:p|phone&phone=%2B1-555-0100';
      expect(await selected('Patient', encoded)).toEqual({ get: [stored.id], form: [stored.id] });
      expect(await creates(patient('phone'), encoded)).toEqual({ rest: [200, stored.id], tx: [200, stored.id] });
      expect(await updates(patient('phone'), encoded)).toEqual({ rest: [200, stored.id], tx: [200, stored.id] });

      const unencoded = 'identifier=urn:p|phone&phone=+1-555-0100';
      expect(await selected('Patient', unencoded)).toEqual({ get: [], form: [] });
      // It matches nothing, so it would create; the resource misses its own condition (` 1-555-0100`): a 400 saying why.
      const outcome = await expectOutcome(await api.post('Patient', patient('phone'), { 'If-None-Exist': unencoded }), 400, 'invalid');
      expect(outcome.issue[0].diagnostics).toContain('%2B');
      const tx = await api.post('', bundle([{ request: { method: 'POST', url: 'Patient', ifNoneExist: unencoded }, resource: patient('phone') }]));
      expect((await expectOutcome(tx, 400, 'invalid')).issue[0].diagnostics).toContain('%2B');
      await expectOutcome(await api.put(`Patient?${unencoded}`, patient('phone')), 400, 'invalid');
      expect(ids(await api.search('Patient?identifier=urn:p|phone'))).toEqual([stored.id]);
    });

    test("a conditional delete's '+' is read as the search's", async () => {
      const stored = await api.create(observation('gone'));
      const res = await api.post('', bundle([{ request: { method: 'DELETE', url: 'Observation?code=urn:c|gone&date=2020-01-01T00:00:00+01:00' } }]));
      expect(res.status).toBe(200);
      expect((await api.get(`Observation/${stored.id}`)).status).toBe(410);
    });
  });
});
