import { afterEach, beforeEach, describe, expect, test } from 'bun:test';
import { createTestApp, testClock, fhirInit, type TestApp } from '../helpers/app.ts';
import { craftToken } from '../helpers/fhir.ts';
import { download, eachStore, finish, kickOff, observation, patient, put, refs, remove } from '../helpers/export.ts';

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

      test('an absolute member is this tenant\'s Patient under its FHIR base alone; another server\'s is named in the error file, and its resources are not exported', async () => {
        const other = 'http://other.org/fhir/Patient/p2';
        await put(t, { resourceType: 'Group', id: 'g4', type: 'person', actual: true, member: [{ entity: { reference: `${t.fhir()}/Patient/p1` } }, { entity: { reference: other } }] });
        // Another server's p1: in no compartment here.
        await put(t, { ...observation('obs-other', 'p1'), subject: { reference: 'http://other.org/fhir/Patient/p1' } });
        clock.advance(1000);
        const manifest = await finish(t, token, await kickOff(t, token, '/Group/g4/$export'));
        expect(refs(await download(t, token, manifest.output))).toEqual([...compartment('p1'), 'Group/g1', 'Group/g4'].sort());
        const texts = (await download(t, token, manifest.error)).OperationOutcome!.map((o) => (o.issue as Record<string, any>[])[0]!.diagnostics);
        expect(texts).toEqual([`Group/g4: Group.member[1].entity '${other}' does not resolve to a stored resource; the member is not exported`]);
      });

      test('members that resolve to no stored Patient are each named in the error file; the others are exported', async () => {
        await put(t, patient('gone'));
        await put(t, observation('obs-gone', 'gone'));
        await remove(t, 'Patient', 'gone');
        const urn = 'urn:uuid:5f0c2a9e-0000-4000-8000-00000000000a';
        await put(t, {
          resourceType: 'Group', id: 'g3', type: 'person', actual: true,
          member: [
            member('p1'),
            { entity: { reference: urn } },
            member('ghost'),
            { entity: { reference: 'Practitioner/dr1' } },
            member('gone'),
            { entity: { reference: 'Group/nogroup' } },
            { entity: { identifier: { system: 'urn:mrn', value: '7' } } },
            member('ghost-inactive', { inactive: true }),
          ],
        });
        clock.advance(1000);
        const manifest = await finish(t, token, await kickOff(t, token, '/Group/g3/$export'));
        expect(refs(await download(t, token, manifest.output))).toEqual([...compartment('p1'), 'Group/g1', 'Group/g3'].sort());
        const errors = (await download(t, token, manifest.error)).OperationOutcome!;
        const issues = errors.map((o) => (o.issue as Record<string, any>[])[0]!);
        expect(issues.map((i) => [i.severity, i.code, i.expression, i.diagnostics])).toEqual([
          ['error', 'not-found', ['Group.member[1].entity'], `Group/g3: Group.member[1].entity '${urn}' does not resolve to a stored resource; the member is not exported`],
          ['error', 'not-supported', ['Group.member[3].entity'], "Group/g3: Group.member[3].entity 'Practitioner/dr1' refers to a Practitioner, not a Patient; the member is not exported"],
          ['error', 'not-found', ['Group.member[6].entity'], 'Group/g3: Group.member[6].entity has no literal reference; the member is not exported'],
          ['error', 'not-found', ['Group.member[5].entity'], "Group/g3: Group.member[5].entity 'Group/nogroup' refers to a Group that does not exist; the member is not exported"],
          ['error', 'not-found', ['Group.member[2].entity'], "Group/g3: Group.member[2].entity 'Patient/ghost' refers to a Patient that does not exist; the member is not exported"],
          ['error', 'not-found', ['Group.member[4].entity'], "Group/g3: Group.member[4].entity 'Patient/gone' refers to a Patient that does not exist; the member is not exported"],
        ]);
        // A token that does not read every Patient is not told which members' Patients exist: their
        // compartments are exported as they stand (gone's Observation, which it may read, too).
        for (const scope of ['system/Group.rs system/Observation.rs', 'system/Group.rs system/Observation.rs system/Patient.rs?_id=p1']) {
          const other = await craftToken(t, scope);
          const theirs = await finish(t, other, await kickOff(t, other, '/Group/g3/$export?_type=Observation'));
          expect({ scope, refs: refs(await download(t, other, theirs.output)) }).toEqual({ scope, refs: ['Observation/obs-gone', 'Observation/obs-p1'] });
          const texts = (await download(t, other, theirs.error)).OperationOutcome!.map((o) => (o.issue as Record<string, any>[])[0]!.diagnostics as string);
          expect(texts.some((text) => text.includes('Patient that does not exist'))).toBe(false);
          expect(texts.length).toBe(4);
        }
      });

      test('a nested Group the token may not read (outside its scope filter) is not followed: its members are not exported', async () => {
        await put(t, { resourceType: 'Group', id: 'people', type: 'person', actual: true, member: [member('p1'), { entity: { reference: 'Group/animals' } }] });
        await put(t, { resourceType: 'Group', id: 'animals', type: 'animal', actual: true, member: [member('p2')] });
        clock.advance(1000);
        const whole = await finish(t, token, await kickOff(t, token, '/Group/people/$export?_type=Observation'));
        expect(refs(await download(t, token, whole.output))).toEqual(['Observation/obs-p1', 'Observation/obs-p2']);
        const people = await craftToken(t, 'system/Group.rs?type=person system/Observation.rs system/Patient.rs');
        expect((await t.request(t.fhir() + '/Group/animals', fhirInit(people))).status).toBe(403);
        const theirs = await finish(t, people, await kickOff(t, people, '/Group/people/$export?_type=Observation'));
        expect(refs(await download(t, people, theirs.output))).toEqual(['Observation/obs-p1']);
        const issues = (await download(t, people, theirs.error)).OperationOutcome!.map((o) => (o.issue as Record<string, any>[])[0]!);
        expect(issues.map((i) => [i.code, i.diagnostics])).toEqual([['forbidden', "Group/people: Group.member[1].entity 'Group/animals' refers to a Group the access token may not read; the member is not exported"]]);
        // Nor does a patient in the unread Group count as a member for `patient`.
        const named = await t.request(t.fhir() + '/Group/people/$export', fhirInit(people, 'POST', { resourceType: 'Parameters', parameter: [{ name: 'patient', valueReference: { reference: 'Patient/p2' } }] }));
        expect(named.status).toBe(400);
      });

      test('a Group whose members all resolve has no error file; members of nested Groups are checked too', async () => {
        const ok = await finish(t, token, await kickOff(t, token, '/Group/g2/$export'));
        expect(ok.error).toEqual([]);
        await put(t, { resourceType: 'Group', id: 'g2', type: 'person', actual: true, member: [member('p6'), member('ghost')] });
        clock.advance(1000);
        const manifest = await finish(t, token, await kickOff(t, token, '/Group/g1/$export?_type=Patient'));
        expect(refs(await download(t, token, manifest.output))).toEqual(['Patient/p1', 'Patient/p2', 'Patient/p6']);
        const texts = (await download(t, token, manifest.error)).OperationOutcome!.map((o) => (o.issue as Record<string, any>[])[0]!.diagnostics);
        expect(texts).toEqual([
          "Group/g1: Group.member[6].entity 'Practitioner/dr1' refers to a Practitioner, not a Patient; the member is not exported",
          "Group/g2: Group.member[1].entity 'Patient/ghost' refers to a Patient that does not exist; the member is not exported",
        ]);
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
      test('with _since, a member whose Patient was created since then joined: its records written before come too', async () => {
        await put(t, observation('obs-late', 'late'));
        await put(t, { resourceType: 'Group', id: 'g5', type: 'person', actual: true, member: [member('p1'), member('late')] });
        clock.advance(1000);
        const first = await finish(t, token, await kickOff(t, token, '/Group/g5/$export?_type=Patient,Observation'));
        expect(refs(await download(t, token, first.output))).toEqual(['Observation/obs-p1', 'Patient/p1']);
        expect(JSON.stringify(await download(t, token, first.error))).toContain("'Patient/late' refers to a Patient that does not exist");
        clock.advance(1000);
        await put(t, patient('late'));
        clock.advance(1000);
        const second = await finish(t, token, await kickOff(t, token, `/Group/g5/$export?_type=Patient,Observation&_since=${first.transactionTime}`));
        expect(refs(await download(t, token, second.output))).toEqual(['Observation/obs-late', 'Patient/late']);
      });

      test('with _since, a member Patient deleted since then has its deletion and its compartment\'s in the deleted files; one deleted before is an error', async () => {
        await remove(t, 'Observation', 'obs-p1');
        await remove(t, 'Patient', 'p1');
        clock.advance(60_000);
        const since = new Date(t.clock.now()).toISOString();
        clock.advance(1000);
        await remove(t, 'Encounter', 'enc-p2');
        await remove(t, 'Patient', 'p2');
        clock.advance(1000);
        const manifest = await finish(t, token, await kickOff(t, token, `/Group/g1/$export?_since=${since}`));
        expect(manifest.output).toEqual([]);
        const deleted = (await download(t, token, manifest.deleted!)).Bundle!.map((b) => (b.entry as { request: { url: string } }[])[0]!.request.url);
        expect(deleted.sort()).toEqual(['Encounter/enc-p2', 'Patient/p2']);
        const errors = JSON.stringify(await download(t, token, manifest.error));
        expect(errors).toContain("'Patient/p1' refers to a Patient that does not exist");
        expect(errors).not.toContain('Patient/p2');
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

      test('with _since, patient may name a Patient deleted since then (its deletion is reported); one deleted before is not known', async () => {
        await remove(t, 'Patient', 'p3');
        clock.advance(60_000);
        const since = new Date(t.clock.now()).toISOString();
        clock.advance(1000);
        await remove(t, 'Observation', 'obs-p4');
        await remove(t, 'Patient', 'p4');
        clock.advance(1000);
        const params = (ids: string[]) => ({ resourceType: 'Parameters', parameter: [{ name: '_since', valueInstant: since }, ...ids.map((id) => ({ name: 'patient', valueReference: { reference: `Patient/${id}` } }))] });
        const res = await t.request(t.fhir() + '/Patient/$export', fhirInit(token, 'POST', params(['p4'])));
        expect(res.status).toBe(202);
        const manifest = await finish(t, token, res.headers.get('content-location')!);
        const deleted = (await download(t, token, manifest.deleted!)).Bundle!.map((b) => (b.entry as { request: { url: string } }[])[0]!.request.url);
        expect(deleted.sort()).toEqual(['Observation/obs-p4', 'Patient/p4']);
        const before = await t.request(t.fhir() + '/Patient/$export', fhirInit(token, 'POST', params(['p3'])));
        expect(before.status).toBe(400);
        expect(await before.text()).toContain('Patient/p3 is not known');
      });

      test('whether a patient exists is told only to a token that reads every Patient: to another, an unknown one is exported as named', async () => {
        const params = (ids: string[]) => ({ resourceType: 'Parameters', parameter: [{ name: '_type', valueString: 'Observation' }, ...ids.map((id) => ({ name: 'patient', valueReference: { reference: `Patient/${id}` } }))] });
        for (const scope of ['system/Observation.rs', 'system/Observation.rs system/Patient.rs?_id=p1']) {
          const other = await craftToken(t, scope);
          const exported = async (ids: string[]) => {
            const res = await t.request(t.fhir() + '/Patient/$export', fhirInit(other, 'POST', params(ids)));
            expect({ scope, ids, status: res.status }).toEqual({ scope, ids, status: 202 });
            return refs(await download(t, other, (await finish(t, other, res.headers.get('content-location')!)).output));
          };
          expect(await exported(['p4', 'ghost'])).toEqual(['Observation/obs-p4']);
          expect(await exported(['ghost'])).toEqual([]);
        }
        // A token that reads every Patient is told, as before.
        expect((await t.request(t.fhir() + '/Patient/$export', fhirInit(await craftToken(t, 'system/Observation.rs system/Patient.rs'), 'POST', params(['ghost'])))).status).toBe(400);
      });
    });
  });
});
