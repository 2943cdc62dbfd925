/**
 * Bulk export of Binaries held to their securityContext (FHIR R4 binary.html), as a read of each is:
 * a token that may not read the type a Binary's context names, or reads it only through a SMART v2
 * filter, does not get that Binary in its files. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, testClock, type TestApp } from '../helpers/app.ts';
import { download, eachStore, finish, kickOff, observation, patient, put, remove } from '../helpers/export.ts';
import { craftToken, fhirClient } from '../helpers/fhir.ts';

const binary = (id: string, context?: string) => ({
  resourceType: 'Binary', id, contentType: 'text/plain', data: 'aGk=', ...(context === undefined ? {} : { securityContext: { reference: context } }),
});

await eachStore((kind, fresh) => {
  describe(`Binary export and securityContext on ${kind}`, () => {
    let t: TestApp;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      await put(t, patient('p1', { gender: 'female' }));
      await put(t, observation('o1', 'p1', 'A'));
      for (const b of [binary('free'), binary('of-p1', 'Patient/p1'), binary('of-o1', 'Observation/o1'), binary('elsewhere', 'http://other.example.org/Patient/1')]) await put(t, b);
    });
    afterAll(() => t.close());

    /** The Binary ids a system export of Binary by a token of `scope` holds, and those its reads reach. */
    const exported = async (scope: string) => {
      const token = await craftToken(t, scope);
      const manifest = await finish(t, token, await kickOff(t, token, '/$export?_type=Binary'));
      const files = await download(t, token, manifest.output);
      const ids = (files.Binary ?? []).map((r) => r.id as string).sort();
      const api = fhirClient(t, token);
      const readable: string[] = [];
      for (const id of ['elsewhere', 'free', 'of-o1', 'of-p1']) if ((await api.get(`Binary/${id}`, { Accept: 'application/fhir+json' })).status === 200) readable.push(id);
      return { ids, readable };
    };

    test("a Binary whose context the token may not read is left out, as its read is refused", async () => {
      const all = ['elsewhere', 'free', 'of-o1', 'of-p1'];
      expect(await exported('system/*.read')).toEqual({ ids: all, readable: all });
      expect(await exported('system/Binary.read')).toEqual({ ids: ['elsewhere', 'free'], readable: ['elsewhere', 'free'] });
      expect(await exported('system/Binary.read system/Observation.read')).toEqual({ ids: ['elsewhere', 'free', 'of-o1'], readable: ['elsewhere', 'free', 'of-o1'] });
    });

    test('a context type read through a SMART v2 filter leaves its Binaries out of the export', async () => {
      const { ids, readable } = await exported('system/Binary.rs system/Patient.rs?gender=female');
      expect(ids).toEqual(['elsewhere', 'free']);
      // A read checks the stored Patient against the filter, which the export does not.
      expect(readable).toEqual(['elsewhere', 'free', 'of-p1']);
    });
    test("with _since, a deleted Binary whose context the token may not read is not in the deleted files (its type history leaves it out too)", async () => {
      const clock = testClock();
      const other = await createTestApp({ clock, store: await fresh() });
      try {
        await put(other, patient('p1'));
        for (const b of [binary('gone-free'), binary('gone-of-p1', 'Patient/p1')]) await put(other, b);
        clock.advance(1000);
        const since = new Date(clock.now()).toISOString();
        clock.advance(1000);
        for (const id of ['gone-free', 'gone-of-p1']) await remove(other, 'Binary', id);
        clock.advance(1000);
        const deletedIds = async (scope: string) => {
          const token = await craftToken(other, scope);
          const manifest = await finish(other, token, await kickOff(other, token, `/$export?_type=Binary&_since=${since}`));
          const bundles = (await download(other, token, manifest.deleted!)).Bundle ?? [];
          return bundles.map((b) => (b.entry as { request: { url: string } }[])[0]!.request.url).sort();
        };
        expect(await deletedIds('system/Binary.rs')).toEqual(['Binary/gone-free']);
        expect(await deletedIds('system/Binary.rs system/Patient.rs')).toEqual(['Binary/gone-free', 'Binary/gone-of-p1']);
      } finally {
        await other.close();
      }
    });
  });
});
