/**
 * History pages under a token that may not see every version, on both databases: a patient's token and
 * the versions of a Provenance naming another patient's version, the versions of a Binary whose
 * securityContext it may not read; type history under a token whose reach of Binary or Provenance is
 * limited (system history needs every type read whole). A page reads on past the versions out of reach
 * (src/fhir/history.ts, reachedPage): it never links to a page of nothing the token may see, which told
 * it that a hidden version came after, and holds `_count` when enough are in reach.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, fhirClient, link, type FhirClient, type Json } from '../helpers/fhir.ts';

const provenance = (id: string, target: string, agent = 'Practitioner/dr1', extra: Json = {}): Json => ({
  resourceType: 'Provenance', id, target: [{ reference: target }], recorded: '2024-01-02T03:04:05Z', agent: [{ who: { reference: agent } }], ...extra,
});
const binary = (id: string, context?: string, extra: Json = {}): Json => ({
  resourceType: 'Binary', id, contentType: 'text/plain', data: 'aGk=', ...(context ? { securityContext: { reference: context } } : {}), ...extra,
});
const observation = (id: string, patient: string): Json => ({ resourceType: 'Observation', id, status: 'final', code: { text: id }, subject: { reference: `Patient/${patient}` } });

await eachStore((kind, fresh) => {
  describe(`history pages past the versions out of a token's reach (${kind})`, () => {
    let t: TestApp;
    let admin: FhirClient;
    const as = async (scopes: string, patient?: string) => fhirClient(t, await craftToken(t, scopes, patient === undefined ? {} : { patient }));
    /** Each page's entries (`id/version`), following `next` links from `path`. */
    const pages = async (api: FhirClient, path: string): Promise<string[][]> => {
      const out: string[][] = [];
      for (let url: string | undefined = path; url !== undefined;) {
        const res = await api.get(url);
        expect({ url, status: res.status }).toEqual({ url, status: 200 });
        const b = (await res.json()) as Json;
        out.push((b.entry ?? []).map((e: Json) => `${e.fullUrl.split('/').at(-1)}/${e.response.etag.replace(/\D/g, '')}`));
        url = link(b, 'next');
        if (out.length > 100) throw new Error('too many pages');
      }
      return out;
    };

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      admin = fhirClient(t, await t.token());
      // `mv` was p2's (version 1) and is p1's now: a Provenance naming its version 1 is out of p1's reach.
      for (const r of [{ resourceType: 'Patient', id: 'p1' }, { resourceType: 'Patient', id: 'p2' }, observation('mv', 'p2'), observation('mv', 'p1')]) await admin.put200(r);
      // `pv`: in reach, out of reach, in reach again; `bx`: out of reach, then in reach.
      for (const target of ['Observation/mv', 'Observation/mv/_history/1', 'Observation/mv/_history/2']) await admin.put200(provenance('pv', target));
      for (const context of ['Patient/p2', 'Patient/p1', 'Patient/p2', 'Patient/p1']) await admin.put200(binary('bx', context));
    });
    afterAll(() => t.close());

    test('instance history of a Provenance or a Binary links on only to versions the patient\'s token may see', async () => {
      const p1 = await as('launch/patient patient/Observation.rs patient/Provenance.rs patient/Binary.rs patient/Patient.rs', 'p1');
      for (const count of [1, 2]) {
        expect({ count, pages: await pages(p1, `Provenance/pv/_history?_count=${count}`) }).toEqual({ count, pages: count === 1 ? [['pv/3'], ['pv/1']] : [['pv/3', 'pv/1']] });
        expect({ count, pages: await pages(p1, `Binary/bx/_history?_count=${count}`) }).toEqual({ count, pages: count === 1 ? [['bx/4'], ['bx/2']] : [['bx/4', 'bx/2']] });
      }
      // The admin's token sees every version, a page of one at a time.
      expect(await pages(admin, 'Binary/bx/_history?_count=2')).toEqual([['bx/4', 'bx/3'], ['bx/2', 'bx/1']]);
    });

    test('type history of Binary and Provenance under a limited reach links on only to versions the token may see', async () => {
      // A tenant of its own: one version in reach of each, then sixty out of reach written after it (history is newest first).
      await t.tokenFor('hist', ['system/*.*']);
      const hist = fhirClient(t, await craftToken(t, 'system/*.*', { tenant: 'hist' }), 'hist');
      for (const r of [{ resourceType: 'Patient', id: 'q' }, binary('free', undefined), provenance('by-dr2', 'Patient/q', 'Practitioner/dr2')]) await hist.put200(r);
      for (let i = 0; i < 60; i++) {
        await hist.put200(binary(`ctx-${i}`, 'Patient/q'));
        await hist.put200(provenance(`by-dr1-${i}`, 'Patient/q'));
      }
      const token = async (scopes: string) => fhirClient(t, await craftToken(t, scopes, { tenant: 'hist' }), 'hist');
      // Binary scopes alone reach no Binary with a context; a Provenance filter on its agent.
      const binaries = await token('system/Binary.read');
      expect(await pages(binaries, 'Binary/_history?_count=1')).toEqual([['free/1']]);
      const dr2 = await token('system/Provenance.rs?agent=Practitioner/dr2');
      expect(await pages(dr2, 'Provenance/_history?_count=1')).toEqual([['by-dr2/1']]);
      // `_at` keeps those current in its period, among those in reach.
      expect(await pages(binaries, 'Binary/_history?_count=1&_at=2000-01-01T00:00:00Z')).toEqual([[]]);
      expect(await pages(dr2, `Provenance/_history?_count=1&_at=${new Date(Date.now() + 60_000).toISOString()}`)).toEqual([['by-dr2/1']]);
      // System history needs every type read whole, so it reaches every version: sixty and more, a page of 100.
      const all = await pages(hist, '_history?_count=100');
      expect(all.map((p) => p.length)).toEqual([100, 23]);
    }, 60_000);
  });
});
