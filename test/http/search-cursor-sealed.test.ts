/**
 * The `_cursor` of a sort on parameters (the place of a page's last match: its family name, birth date,
 * code) is sealed (AES-256-GCM, a key derived from the signing keys in the database) and bound to its
 * tenant, its type and its client: a `next` link holds none of the page's values however it is decoded; an altered cursor, another
 * tenant's, a forged plain one, or one sealed under a key no longer published is a 400 naming `_cursor`
 * that says to search again and echoes nothing; a second server on the same database follows the first's
 * links. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { MIN_ROTATION_DELAY_MS } from '../../src/auth/keys.ts';
import { MAX_TOKEN_TTL } from '../../src/auth/tokens.ts';
import { createTestApp, fhirInit, secondServer, type TestApp } from '../helpers/app.ts';
import { expectOutcome, fhirClient, ids, link, type FhirClient, type Json } from '../helpers/fhir.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const FAMILIES = ['Quennell', 'Abernathy', 'Zylstra', 'Marchetti', 'Okonkwo', 'Lindqvist', 'Brannigan', 'Verhoeven'];
const patient = (i: number): Json => ({
  resourceType: 'Patient', id: `sealp${i}`,
  name: [{ family: FAMILIES[i % FAMILIES.length], given: [`Given${i}x`] }],
  birthDate: `19${50 + i}-0${1 + (i % 9)}-1${i % 10}`,
});
const observation = (i: number): Json => ({
  resourceType: 'Observation', id: `sealo${i}`, status: 'final',
  code: { coding: [{ system: 'http://loinc.org', code: `88${i}1-${i % 7}` }] },
  effectiveDateTime: `2021-0${1 + (i % 9)}-1${i % 10}T08:30:00Z`,
});

const QUERIES = ['Patient?_sort=family', 'Patient?_sort=-birthdate,family', 'Observation?_sort=code,-date'];

/** The texts a `_cursor` value reads as: itself, percent-decoded, and base64 / base64url decoded (whole and by its dot-separated parts). */
function readings(cursor: string): string[] {
  const out = new Set<string>([cursor]);
  const decodings = (s: string) => {
    out.add(s);
    try {
      out.add(decodeURIComponent(s));
    } catch {
      // not percent-encoded
    }
    for (const enc of ['base64', 'base64url'] as const) {
      const text = Buffer.from(s, enc).toString('utf8');
      out.add(text);
      out.add(Buffer.from(s, enc).toString('latin1'));
      // Twice encoded.
      out.add(Buffer.from(text, enc).toString('utf8'));
    }
  };
  for (const s of [cursor, ...cursor.split('.'), ...cursor.split('.').map((p) => p.slice(1))]) decodings(s);
  return [...out];
}

/** The values of a page's matches that a place in its sort would name. */
function valuesOf(bundle: Json): string[] {
  const out: string[] = [];
  for (const e of bundle.entry ?? []) {
    const r = e.resource as Json;
    out.push(r.id);
    for (const n of r.name ?? []) out.push(n.family, ...(n.given ?? []), n.family.toLowerCase());
    if (r.birthDate) out.push(r.birthDate);
    for (const c of r.code?.coding ?? []) out.push(c.code);
    if (r.effectiveDateTime) out.push(r.effectiveDateTime, r.effectiveDateTime.slice(0, 10));
  }
  return out;
}

/** A link's sealed cursor, without the first page's time after its `~` (src/fhir/search-time.ts), which is outside the seal. */
const cursorOf = (url: string) => new URL(url).searchParams.get('_cursor')!.split('~')[0]!;

for (const target of targets) {
  describe(`sealed cursors of sorts on parameters, on ${target.kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    let other: FhirClient;
    let second: (path: string, init: RequestInit) => Promise<Response>;
    let token: string;

    beforeAll(async () => {
      const db = await target.migrated();
      t = await createTestApp({ store: db.open() });
      token = await t.token();
      api = fhirClient(t, token);
      // Tenant t2 holds the same resources: a place in t1's order is one in t2's too, but is not t2's to use.
      other = fhirClient(t, await t.tokenFor('t2', ['system/*.*']), 't2');
      for (let i = 0; i < 12; i++) {
        for (const client of [api, other]) {
          await client.put200(patient(i));
          await client.put200(observation(i));
        }
      }
      second = await secondServer(t, () => db.open());
    });
    afterAll(() => t.close());

    test('a next link holds none of the page\'s values, read as it is, percent-, base64- or base64url-decoded', async () => {
      for (const query of QUERIES) {
        let url: string | undefined = `${query}&_count=3`;
        let pages = 0;
        while (url) {
          const bundle = await api.search(url);
          const next = link(bundle, 'next');
          if (next !== undefined) {
            const texts = readings(cursorOf(next));
            const whole = [next, decodeURIComponent(next)];
            for (const value of valuesOf(bundle)) {
              const leaks = [...texts, ...whole].filter((text) => text.includes(value));
              expect({ query, value, leaks }).toEqual({ query, value, leaks: [] });
            }
          }
          url = next;
          pages++;
        }
        expect(pages).toBe(4);
      }
    });

    test('paging by sealed cursors reads every match once, in order, as one page does', async () => {
      for (const query of QUERIES) {
        const all = ids(await api.search(`${query}&_count=100`));
        const seen: string[] = [];
        let url: string | undefined = `${query}&_count=5`;
        while (url) {
          const bundle = await api.search(url);
          seen.push(...ids(bundle));
          url = link(bundle, 'next');
        }
        expect({ query, seen }).toEqual({ query, seen: all });
      }
    });

    test('an altered cursor, a forged plain one, or none this server gives: a 400 naming _cursor, saying to search again, echoing nothing', async () => {
      const first = await api.search('Patient?_sort=family&_count=3');
      const next = link(first, 'next')!;
      const cursor = cursorOf(next);
      const [kid, body] = cursor.split('.') as [string, string];
      const flip = (s: string, at: number) => s.slice(0, at) + (s[at] === 'A' ? 'B' : 'A') + s.slice(at + 1);
      const forged = Buffer.from(JSON.stringify({ k: ['Abernathy'], i: 'sealp1', o: 3 })).toString('base64url');
      for (const bad of [
        `${kid}.${flip(body, 0)}`, `${kid}.${flip(body, Math.floor(body.length / 2))}`, `${kid}.${flip(body, body.length - 2)}`,
        `${kid}.${body.slice(0, -4)}`, `${kid}.${body}AAAA`, `${kid}.`, `${flip(kid, 0)}.${body}`, `.${body}`, `${kid}.${body}.x`,
        `${kid}.${body.slice(0, 20)}`, forged, `${kid}.${forged}`,
      ]) {
        const res = await api.get(`Patient?_sort=family&_count=3&_cursor=${encodeURIComponent(bad)}`);
        const outcome = await expectOutcome(res, 400);
        expect({ bad, expression: outcome.issue[0].expression }).toEqual({ bad, expression: ['_cursor'] });
        expect(outcome.issue[0].diagnostics).toContain('search again');
        const text = JSON.stringify(outcome);
        expect({ bad, echoed: [bad, body, forged, ...valuesOf(first)].filter((v) => text.includes(v)) }).toEqual({ bad, echoed: [] });
      }
      // The untouched cursor still pages on.
      expect(ids(await api.search(next))).toHaveLength(3);
    });

    test('another tenant\'s cursor is a 400 naming _cursor, though the place is one of its own order', async () => {
      const mine = link(await api.search('Patient?_sort=family&_count=3'), 'next')!;
      const res = await other.get(`Patient?_sort=family&_count=3&_cursor=${encodeURIComponent(cursorOf(mine))}`);
      const outcome = await expectOutcome(res, 400);
      expect(outcome.issue[0].expression).toEqual(['_cursor']);
      expect(outcome.issue[0].diagnostics).toContain('search again');
      // t2's own link to the same place pages on.
      const theirs = link(await other.search('Patient?_sort=family&_count=3'), 'next')!;
      expect(ids(await other.search(theirs))).toEqual(ids(await api.search(mine)));
    });

    test('a cursor opens only in a search of its type by its client: another client of the tenant, or a search of another type whose keys it fits, is a 400; the client\'s next token follows it', async () => {
      const next = link(await api.search('Patient?_sort=family&_count=3'), 'next')!;
      const cursor = encodeURIComponent(cursorOf(next));
      const expected = ids(await api.search(next));
      // The same scopes, another client: the page it would start tells where the sealed name falls among names it can write.
      const stranger = fhirClient(t, await t.tokenFor('t1', ['system/*.*']));
      for (const [client, query] of [[stranger, 'Patient?_sort=family&_count=3'], [api, 'Observation?_sort=code&_count=3']] as const) {
        const outcome = await expectOutcome(await client.get(`${query}&_cursor=${cursor}`), 400);
        expect({ query, expression: outcome.issue[0].expression }).toEqual({ query, expression: ['_cursor'] });
        expect(outcome.issue[0].diagnostics).toContain('search again');
      }
      expect(ids(await fhirClient(t, await t.token()).search(next))).toEqual(expected);
    });

    test('history, $everything and searches across types refuse a _cursor they did not give with a 400 naming it, echoing none of it', async () => {
      const forged = `forged${'Zq'.repeat(600)}`;
      const byId = Buffer.from(JSON.stringify({ t: 0, i: 'x', u: 1 })).toString('base64url');
      for (const path of [`_history?_cursor=${forged}`, `Patient/_history?_cursor=${forged}`, `Patient/sealp1/$everything?_cursor=${forged}`, `?_type=Patient&_cursor=${forged}`, `?_type=Patient&_cursor=${byId}`]) {
        const outcome = await expectOutcome(await api.get(path), 400);
        expect({ path, expression: outcome.issue[0].expression }).toEqual({ path, expression: ['_cursor'] });
        const text = JSON.stringify(outcome);
        expect({ path, echoed: [forged, byId].filter((v) => text.includes(v)) }).toEqual({ path, echoed: [] });
      }
    });

    test('a Bundle\'s GET entry follows a sealed cursor, in a batch and in a transaction (checked before the writes); another tenant\'s is a 400 there too', async () => {
      const next = link(await api.search('Patient?_sort=family&_count=3'), 'next')!;
      const url = next.replace(/^.*\/fhir\/R4\//, '');
      const expected = ids(await api.search(url));
      for (const type of ['batch', 'transaction']) {
        const res = await api.post('', { resourceType: 'Bundle', type, entry: [{ request: { method: 'GET', url } }] });
        const body = (await res.json()) as Json;
        expect({ type, status: res.status }).toEqual({ type, status: 200 });
        expect({ type, status: body.entry[0].response.status }).toEqual({ type, status: '200 OK' });
        expect(ids(body.entry[0].resource)).toEqual(expected);
      }
      const res = await other.post('', { resourceType: 'Bundle', type: 'transaction', entry: [{ request: { method: 'GET', url } }] });
      const outcome = await expectOutcome(res, 400);
      expect(outcome.issue[0].diagnostics).toContain('search again');
    });

    test('a second server on the same database follows the first\'s links, and the first the second\'s', async () => {
      const all = ids(await api.search('Patient?_sort=-birthdate,family&_count=100'));
      const seen: string[] = [];
      let url: string | undefined = `${t.fhir()}/Patient?_sort=-birthdate,family&_count=4`;
      for (let page = 0; url; page++) {
        const res: Response = await (page % 2 === 0 ? t.request(url, fhirInit(token)) : second(url, fhirInit(token)));
        expect(res.status).toBe(200);
        const bundle = (await res.json()) as Json;
        seen.push(...ids(bundle));
        url = link(bundle, 'next');
      }
      expect(seen).toEqual(all);
    });

    test('a cursor sealed under a signing key since rotated pages on while the key is published, then is a 400 saying to search again', async () => {
      const next = link(await api.search('Observation?_sort=code,-date&_count=3'), 'next')!;
      const expected = ids(await api.search(next));
      await t.keys.rotate({ delayMs: MIN_ROTATION_DELAY_MS });
      t.clock.advance(MIN_ROTATION_DELAY_MS);
      // The client's token of before has expired meanwhile (the hand-over outlasts a token's lifetime): a new one.
      const now = fhirClient(t, await t.token());
      expect(ids(await now.search(next))).toEqual(expected);
      // A cursor given now is sealed under the new key.
      const fresh = link(await now.search('Observation?_sort=code,-date&_count=3'), 'next')!;
      expect(cursorOf(fresh).split('.')[0]).not.toBe(cursorOf(next).split('.')[0]);
      // Past the longest token lifetime (and the reload margins), the retired key is no longer published.
      t.clock.advance(MAX_TOKEN_TTL * 1000 + 5 * 60_000);
      const later = fhirClient(t, await t.token());
      const outcome = await expectOutcome(await later.get(next.replace(/^.*\/fhir\/R4\//, '')), 400);
      expect(outcome.issue[0].expression).toEqual(['_cursor']);
      expect(outcome.issue[0].diagnostics).toContain('search again');
      expect(ids(await later.search(link(await later.search('Observation?_sort=code,-date&_count=3'), 'next')!))).toEqual(expected);
    });
  });
}
