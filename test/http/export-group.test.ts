import { afterEach, beforeEach, describe, expect, test } from 'bun:test';
import { createTestApp, testClock, fhirInit, type TestApp } from '../helpers/app.ts';
import { download, eachStore, finish, kickOff, observation, patient, put, refs } from '../helpers/export.ts';

let t: TestApp;
let clock: ReturnType<typeof testClock>;
let token: string;

const member = (id: string, extra: Record<string, unknown> = {}) => ({ entity: { reference: `Patient/${id}` }, ...extra });

await eachStore((kind, fresh) => {
  describe(kind, () => {
    beforeEach(async () => {
      t = await createTestApp({ clock: (clock = testClock()), store: await fresh() });
      token = await t.token();
      for (const id of ['p1', 'p2', 'p3', 'p4', 'p5', 'p6']) {
        await put(t, patient(id));
        await put(t, observation(`obs-${id}`, id));
        await put(t, { resourceType: 'Encounter', id: `enc-${id}`, status: 'finished', class: { code: 'AMB' }, subject: { reference: `Patient/${id}` } });
      }
      await put(t, { resourceType: 'Practitioner', id: 'dr1' });
      await put(t, { resourceType: 'Medication', id: 'm1' });
      await put(t, {
        resourceType: 'Group', id: 'g1', type: 'person', actual: true,
        member: [
          member('p1'),
          member('p2', { period: { start: '2020-01-01', end: '2030-12-31' } }),
          member('p3', { inactive: true }),
          member('p4', { period: { end: '2025-01-01' } }),
          member('p5', { period: { start: '2027-01-01' } }),
          { entity: { reference: 'Group/g2' } },
          { entity: { reference: 'Practitioner/dr1' } },
        ],
      });
      await put(t, { resourceType: 'Group', id: 'g2', type: 'person', actual: true, member: [member('p6')] });
    });
    afterEach(async () => t.close());

    const compartment = (id: string) => [`Encounter/enc-${id}`, `Observation/obs-${id}`, `Patient/${id}`];
    /** Groups are in the Patient compartment of their members (R4 CompartmentDefinition: Group.member). */
    const groupsOf: Record<string, string[]> = { p1: ['Group/g1'], p2: ['Group/g1'], p3: ['Group/g1'], p4: ['Group/g1'], p5: ['Group/g1'], p6: ['Group/g2'] };
    const withGroups = (...ids: string[]) => [...new Set(ids.flatMap((id) => [...compartment(id), ...groupsOf[id]!]))].sort();

    describe(`Group export (${kind})`, () => {
      test("exactly the compartments of the current members (inactive and out-of-period members excluded), nested groups followed", async () => {
        const status = await kickOff(t, token, '/Group/g1/$export?_outputFormat=ndjson');
        const files = await download(t, token, (await finish(t, token, status)).output);
        expect(refs(files)).toEqual(withGroups('p1', 'p2', 'p6'));
      });

      test('_type limits it; types outside the Patient compartment are refused', async () => {
        const status = await kickOff(t, token, '/Group/g1/$export?_type=Patient');
        expect(refs(await download(t, token, (await finish(t, token, status)).output))).toEqual(['Patient/p1', 'Patient/p2', 'Patient/p6']);
        const res = await t.request(t.fhir() + '/Group/g1/$export?_type=Medication', fhirInit(token));
        expect(res.status).toBe(400);
      });

      test('an unknown or deleted Group is a 404', async () => {
        expect((await t.request(t.fhir() + '/Group/nope/$export', fhirInit(token))).status).toBe(404);
      });

      test('patient (POST) limits a Group export to those members; a non-member is a 400', async () => {
        const body = (refs: string[]) => ({ resourceType: 'Parameters', parameter: refs.map((reference) => ({ name: 'patient', valueReference: { reference } })) });
        const res = await t.request(t.fhir() + '/Group/g1/$export', fhirInit(token, 'POST', body(['Patient/p2'])));
        expect(res.status).toBe(202);
        const files = await download(t, token, (await finish(t, token, res.headers.get('content-location')!)).output);
        expect(refs(files)).toEqual(withGroups('p2'));
        const bad = await t.request(t.fhir() + '/Group/g1/$export', fhirInit(token, 'POST', body(['Patient/p3'])));
        expect(bad.status).toBe(400);
      });

      test('with _since, members who joined since then come with all their data', async () => {
        clock.advance(60_000);
        const since = new Date(t.clock.now()).toISOString();
        clock.advance(1000);
        await put(t, observation('obs-p1-new', 'p1'));
        await put(t, { resourceType: 'Group', id: 'g2', type: 'person', actual: true, member: [member('p6'), member('p3')] });
        const status = await kickOff(t, token, `/Group/g1/$export?_since=${since}`);
        const files = await download(t, token, (await finish(t, token, status)).output);
        // p3 joined (through g2) after _since: all of its compartment, whatever the time; of p1 only what changed.
        expect(refs(files)).toEqual([...withGroups('p3'), 'Group/g2', 'Observation/obs-p1-new'].sort());
      });
    });

    describe(`Patient export (${kind})`, () => {
      test('every patient compartment, nothing outside it', async () => {
        const status = await kickOff(t, token, '/Patient/$export');
        const files = await download(t, token, (await finish(t, token, status)).output);
        expect(refs(files)).toEqual(withGroups('p1', 'p2', 'p3', 'p4', 'p5', 'p6'));
      });

      test('patient (POST) limits it to those patients; an unknown patient is a 400 unless lenient', async () => {
        const params = (ids: string[]) => ({ resourceType: 'Parameters', parameter: ids.map((id) => ({ name: 'patient', valueReference: { reference: `Patient/${id}` } })) });
        const res = await t.request(t.fhir() + '/Patient/$export', fhirInit(token, 'POST', params(['p4', 'p5'])));
        const files = await download(t, token, (await finish(t, token, res.headers.get('content-location')!)).output);
        expect(refs(files)).toEqual(withGroups('p4', 'p5'));
        expect((await t.request(t.fhir() + '/Patient/$export', fhirInit(token, 'POST', params(['p4', 'ghost'])))).status).toBe(400);
        const lenient = await t.request(t.fhir() + '/Patient/$export', fhirInit(token, 'POST', params(['p4', 'ghost']), { Prefer: 'handling=lenient' }));
        expect(lenient.status).toBe(202);
        const manifest = await finish(t, token, lenient.headers.get('content-location')!);
        expect(refs(await download(t, token, manifest.output))).toEqual(withGroups('p4'));
        expect(JSON.stringify(await download(t, token, manifest.error))).toContain('ghost');
      });
    });
  });
});
