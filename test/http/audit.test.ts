/**
 * The audit trail (CINDER_AUDIT=on) through `app.request()`, on both databases: each REST interaction and
 * OAuth event leaves one BALP-shaped AuditEvent in its tenant, written when the queue is flushed; AuditEvents
 * are searchable, append-only, not audited when written, and none are made with CINDER_AUDIT=off.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { deflateSync, gzipSync } from 'node:zlib';
import { toFhirXml } from '../../src/fhir/xml/to-xml.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { craftToken, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { signIn, testUser, userClient } from '../helpers/oauth.ts';
import { storeTargets } from '../helpers/stores.ts';
import { testCoreBundle } from '../helpers/terminology-service.ts';
import { createApp } from '../../src/app.ts';
import { silentLogger } from '../../src/log.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const RESTFUL = 'http://hl7.org/fhir/restful-interaction';
const subtypeOf = (e: Json) => e.subtype?.[0]?.code as string;
const whats = (e: Json) => (e.entity ?? []).filter((x: Json) => x.role?.code === '4').map((x: Json) => x.what.reference);
const patientsOf = (e: Json) => (e.entity ?? []).filter((x: Json) => x.role?.code === '1').map((x: Json) => x.what.reference);
const queryOf = (e: Json) => {
  const q = (e.entity ?? []).find((x: Json) => x.role?.code === '24');
  return q ? Buffer.from(q.query, 'base64').toString() : undefined;
};

async function open(target: (typeof targets)[number], audit: 'on' | 'off', env: Record<string, string> = {}) {
  const db = await target.migrated();
  const store = db.open();
  await store.migrate();
  const t = await createTestApp({ store, env: { CINDER_AUDIT: audit, ...env } });
  return { t, api: fhirClient(t, await t.token()) };
}

/** Every AuditEvent of t1 (flushed first), oldest first; the search itself is audited after it answered. */
async function events(t: TestApp, api: FhirClient, query = ''): Promise<Json[]> {
  await t.app.audit?.flush();
  const bundle = await api.search(`AuditEvent?_count=1000&_sort=date${query ? `&${query}` : ''}`);
  return (bundle.entry ?? []).map((e: Json) => e.resource);
}

for (const target of targets) {
  describe(`audit trail, on ${target.kind}`, () => {
    test('each interaction kind leaves its AuditEvent: codes, outcome, agent, entity with version, patient', async () => {
      const { t, api } = await open(target, 'on');
      try {
        expect((await api.put('Patient/p1', { resourceType: 'Patient', id: 'p1' })).status).toBe(201);
        const obs = await api.create({ resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/p1' } });
        expect((await api.get(`Observation/${obs.id}`)).status).toBe(200);
        expect((await api.get(`Observation/${obs.id}/_history/1`)).status).toBe(200);
        expect((await api.put(`Observation/${obs.id}`, { ...obs, status: 'amended' })).status).toBe(200);
        const patched = await api.call('PATCH', `Observation/${obs.id}`, [{ op: 'replace', path: '/status', value: 'final' }], { 'Content-Type': 'application/json-patch+json' });
        expect(patched.status).toBe(200);
        expect((await api.get('Observation?patient=p1')).status).toBe(200);
        expect((await api.get(`Observation/${obs.id}/_history`)).status).toBe(200);
        expect((await api.get('Patient/p1/$everything')).status).toBe(200);
        expect((await api.del(`Observation/${obs.id}`)).status).toBeLessThan(300);
        expect((await api.get('Observation/nope')).status).toBe(404);

        const all = await events(t, api);
        const rest = all.filter((e) => e.type.code === 'rest');
        const byKind = (kind: string) => rest.filter((e) => subtypeOf(e) === kind);
        for (const e of rest) {
          expect(e.subtype[0].system).toBe(RESTFUL);
          expect(e.agent.find((a: Json) => a.requestor).who.identifier.value).toBe(t.admin.client.clientId);
          expect(e.source.observer.display).toContain('/tenants/t1/fhir/R4');
          expect(JSON.stringify(e)).not.toContain('amended'); // no resource content
        }
        const [update] = byKind('update').filter((e) => whats(e)[0]?.startsWith('Patient'));
        expect(update).toMatchObject({ action: 'U', outcome: '0' });
        expect(whats(update!)).toEqual(['Patient/p1/_history/1']);
        expect(patientsOf(update!)).toEqual(['Patient/p1']);
        const [create] = byKind('create');
        expect(create).toMatchObject({ action: 'C', outcome: '0' });
        expect(create!.meta.profile).toEqual(['https://profiles.ihe.net/ITI/BALP/StructureDefinition/IHE.BasicAudit.PatientCreate']);
        expect(whats(create!)).toEqual([`Observation/${obs.id}/_history/1`]);
        expect(patientsOf(create!)).toEqual(['Patient/p1']);
        const reads = byKind('read');
        expect(reads.map((e) => [e.action, e.outcome, whats(e)[0], patientsOf(e)[0]])).toEqual([
          ['R', '0', `Observation/${obs.id}/_history/1`, 'Patient/p1'],
          ['R', '4', 'Observation/nope', undefined],
        ]);
        expect(reads[1]!.outcomeDesc).toBe('HTTP 404');
        expect(whats(byKind('vread')[0]!)).toEqual([`Observation/${obs.id}/_history/1`]);
        expect(byKind('update').map((e) => whats(e)[0])).toContain(`Observation/${obs.id}/_history/2`);
        expect(byKind('patch').map((e) => [e.action, whats(e)[0], patientsOf(e)[0]])).toEqual([['U', `Observation/${obs.id}/_history/3`, 'Patient/p1']]);
        const [del] = byKind('delete');
        expect(del).toMatchObject({ action: 'D', outcome: '0' });
        expect(patientsOf(del!)).toEqual(['Patient/p1']);
        const searches = byKind('search').filter((e) => queryOf(e)?.includes('/Observation'));
        expect(searches.map((e) => [e.action, queryOf(e), patientsOf(e)[0]])).toEqual([['E', 'GET /tenants/t1/fhir/R4/Observation?patient=p1', 'Patient/p1']]);
        expect(byKind('history').map((e) => e.action)).toEqual(['E']);
        const [everything] = byKind('operation');
        expect(everything).toMatchObject({ action: 'E', outcome: '0', outcomeDesc: '$everything' });
        expect(patientsOf(everything!)).toEqual(['Patient/p1']);
        // Each conforms to the R4 AuditEvent definition.
        for (const e of [update, create, reads[1], del, searches[0], everything]) {
          const { id: _id, meta: _meta, ...resource } = e!;
          const res = await api.post('AuditEvent/$validate', resource);
          const errors = ((await res.json()) as Json).issue.filter((i: Json) => i.severity === 'error' || i.severity === 'fatal');
          expect(errors).toEqual([]);
        }
        // The token request of the test's client is recorded too.
        expect(all.some((e) => e.subtype[0].code === 'token' && e.outcome === '0')).toBe(true);
      } finally {
        await t.close();
      }
    });

    test("a compartment search names the compartment's focal resource and its patient: Encounter/{id}/Observation as Patient/{id}/Observation", async () => {
      const { t, api } = await open(target, 'on');
      try {
        await api.put('Patient/p1', { resourceType: 'Patient', id: 'p1' });
        await api.put('Encounter/e1', { resourceType: 'Encounter', id: 'e1', status: 'finished', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' }, subject: { reference: 'Patient/p1' } });
        expect((await api.get('Encounter/e1/Observation')).status).toBe(200);
        expect((await api.get('Patient/p1/Observation')).status).toBe(200);
        const searches = (await events(t, api)).filter((e) => subtypeOf(e) === 'search' && queryOf(e)?.includes('/Observation'));
        expect(searches.map((e) => [queryOf(e), whats(e), patientsOf(e)])).toEqual([
          ['GET /tenants/t1/fhir/R4/Encounter/e1/Observation', ['Encounter/e1'], ['Patient/p1']],
          ['GET /tenants/t1/fhir/R4/Patient/p1/Observation', [], ['Patient/p1']],
        ]);
      } finally {
        await t.close();
      }
    });

    test('operations are audited: $export kick-off and $graphql', async () => {
      const { t, api } = await open(target, 'on');
      try {
        await api.put('Patient/p1', { resourceType: 'Patient', id: 'p1' });
        expect((await api.get('Patient/$export', { Accept: 'application/fhir+json', Prefer: 'respond-async' })).status).toBe(202);
        expect((await api.post('$graphql', { query: '{ PatientList { id } }' }, { 'Content-Type': 'application/json' })).status).toBe(200);
        const ops = (await events(t, api)).filter((e) => subtypeOf(e) === 'operation');
        expect(ops.map((e) => [e.action, e.outcome, e.outcomeDesc])).toEqual([['E', '0', '$export'], ['E', '0', '$graphql']]);
      } finally {
        await t.close();
      }
    });

    test('a POSTed operation with a query string is audited with its query, not its body (the resources it was sent)', async () => {
      const { t, api } = await open(target, 'on');
      try {
        const patient = { resourceType: 'Patient', name: [{ family: 'Convertedname' }] };
        expect((await api.post('$convert?_format=json', patient)).status).toBe(200);
        expect((await api.post('Patient/$validate?_pretty=true', patient)).status).toBe(200);
        const ops = (await events(t, api)).filter((e) => subtypeOf(e) === 'operation');
        expect(ops.map((e) => [e.outcomeDesc, queryOf(e)])).toEqual([
          ['$convert', 'POST /tenants/t1/fhir/R4/$convert?_format=json'],
          ['$validate', 'POST /tenants/t1/fhir/R4/Patient/$validate?_pretty=true'],
        ]);
      } finally {
        await t.close();
      }
    });

    test('a refused request is audited with a failure outcome', async () => {
      const { t, api } = await open(target, 'on');
      try {
        const readOnly = fhirClient(t, await t.tokenFor('t1', ['system/Observation.rs']));
        expect((await readOnly.post('Patient', { resourceType: 'Patient' })).status).toBe(403);
        const creates = (await events(t, api)).filter((e) => subtypeOf(e) === 'create');
        expect(creates.map((e) => [e.action, e.outcome, e.outcomeDesc])).toEqual([['C', '4', 'HTTP 403']]);
      } finally {
        await t.close();
      }
    });

    test('a transaction is one AuditEvent naming what it wrote; a batch audits each entry', async () => {
      const { t, api } = await open(target, 'on');
      try {
        const tx = await api.post('', {
          resourceType: 'Bundle', type: 'transaction', entry: [
            { fullUrl: 'urn:uuid:1', resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient' } },
            { resource: { resourceType: 'Patient', id: 'p2' }, request: { method: 'PUT', url: 'Patient/p2' } },
          ],
        });
        expect(tx.status).toBe(200);
        const batch = await api.post('', { resourceType: 'Bundle', type: 'batch', entry: [{ request: { method: 'GET', url: 'Patient/p2' } }] });
        expect(batch.status).toBe(200);
        const all = await events(t, api);
        const [transaction] = all.filter((e) => subtypeOf(e) === 'transaction');
        expect(transaction!.action).toBe('E');
        expect(whats(transaction!)).toHaveLength(2);
        expect(whats(transaction!)).toContain('Patient/p2/_history/1');
        expect(patientsOf(transaction!)).toContain('Patient/p2');
        // Each entry as its own interaction, beside the Bundle's event.
        expect(all.filter((e) => subtypeOf(e) === 'create').map((e) => whats(e)[0])).toEqual([whats(transaction!).find((w: string) => w !== 'Patient/p2/_history/1')]);
        expect(all.filter((e) => subtypeOf(e) === 'update').map((e) => [whats(e)[0], patientsOf(e)[0]])).toEqual([['Patient/p2/_history/1', 'Patient/p2']]);
        expect(all.filter((e) => subtypeOf(e) === 'batch')).toHaveLength(1);
        expect(all.filter((e) => subtypeOf(e) === 'read').map((e) => whats(e)[0])).toEqual(['Patient/p2/_history/1']);
      } finally {
        await t.close();
      }
    });

    test('a batch whose response nests deeper than a request body may (a deep resource read back), in JSON or XML, still audits each entry', async () => {
      const { t, api } = await open(target, 'on');
      try {
        // A Patient nested 999 levels deep (extensions within extensions): a body may nest 1,000 levels, and its batch-response 1,002.
        let extension: Json = { url: 'http://example.org/deep', valueString: 'leaf' };
        for (let i = 0; i < 498; i++) extension = { url: 'http://example.org/deep', extension: [extension] };
        const put = await api.call('PUT', 'Patient/deep', { resourceType: 'Patient', id: 'deep', extension: [extension] });
        expect(put.status).toBe(201);
        // Read sixteen times: the response is read in slices (over 256 KiB of JSON, 64 KiB of XML).
        const read = { resourceType: 'Bundle', type: 'batch', entry: Array.from({ length: 16 }, () => ({ request: { method: 'GET', url: 'Patient/deep' } })) };
        expect((await api.post('', read)).status).toBe(200);
        const xml = await api.call('POST', '', read, { Accept: 'application/fhir+xml' });
        expect([xml.status, xml.headers.get('content-type')]).toEqual([200, 'application/fhir+xml; charset=utf-8']);
        const all = await events(t, api);
        expect(all.filter((e) => subtypeOf(e) === 'batch')).toHaveLength(2);
        expect(all.filter((e) => subtypeOf(e) === 'transaction')).toHaveLength(0);
        expect(all.filter((e) => subtypeOf(e) === 'read').map((e) => [whats(e)[0], patientsOf(e)[0]])).toEqual(Array(32).fill(['Patient/deep/_history/1', 'Patient/deep']));
      } finally {
        await t.close();
      }
    });

    test('a search form that is not UTF-8 (refused) is recorded as the bytes sent, whether sized, chunked or compressed: never as U+FFFD, never left out', async () => {
      const { t, api } = await open(target, 'on');
      try {
        const token = await t.token();
        // A Latin-1 ü (0xFC), beside a patient the search names.
        const form = new Uint8Array(Buffer.from('patient=Patient/pl&family=M\xfcller', 'latin1'));
        const chunked = () => {
          let at = 0;
          return new ReadableStream<Uint8Array>({ pull(c) { if (at >= form.length) return c.close(); c.enqueue(form.slice(at, (at += 5))); } });
        };
        const sends: [BodyInit, Record<string, string>][] = [[form, { 'Content-Length': String(form.length) }], [chunked(), {}], [new Uint8Array(gzipSync(form)), { 'Content-Encoding': 'gzip' }]];
        for (const [body, headers] of sends) {
          const res = await t.request(`${t.fhir()}/Observation/_search`, { method: 'POST', body, headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/x-www-form-urlencoded', ...headers } });
          expect(res.status).toBe(400);
        }
        const searches = (await events(t, api)).filter((e) => subtypeOf(e) === 'search');
        const sent = Buffer.concat([Buffer.from(`POST /tenants/t1/fhir/R4/Observation/_search\n\n`), form]).toString('base64');
        expect(searches.map((e) => [e.outcome, (e.entity ?? []).find((x: Json) => x.role?.code === '24')?.query, patientsOf(e)])).toEqual(Array(3).fill(['4', sent, ['Patient/pl']]));
      } finally {
        await t.close();
      }
    });

    test('a batch or a search form sent compressed (Content-Encoding: gzip or deflate) is audited as one sent plain is', async () => {
      const { t, api } = await open(target, 'on');
      try {
        expect((await api.put('Patient/pz', { resourceType: 'Patient', id: 'pz' })).status).toBe(201);
        const read = JSON.stringify({ resourceType: 'Bundle', type: 'batch', entry: [{ request: { method: 'GET', url: 'Patient/pz' } }] });
        const token = await t.token();
        for (const [coding, body] of [['gzip', gzipSync(read)], ['deflate', deflateSync(read)]] as const) {
          const res = await t.request(t.fhir(), { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json', 'Content-Encoding': coding }, body });
          expect([coding, res.status]).toEqual([coding, 200]);
        }
        // A search's form too is recorded as sent.
        const search = await t.request(`${t.fhir()}/Patient/_search`, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/x-www-form-urlencoded', 'Content-Encoding': 'gzip' }, body: gzipSync('_id=pz') });
        expect(search.status).toBe(200);
        const plain = await t.request(`${t.fhir()}/Patient/_search`, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/x-www-form-urlencoded' }, body: '_id=pz' });
        expect(plain.status).toBe(200);
        const all = await events(t, api);
        expect(all.filter((e) => subtypeOf(e) === 'batch')).toHaveLength(2);
        expect(all.filter((e) => subtypeOf(e) === 'read').map((e) => [whats(e)[0], patientsOf(e)[0]])).toEqual(Array(2).fill(['Patient/pz/_history/1', 'Patient/pz']));
        expect(all.filter((e) => subtypeOf(e) === 'search').map((e) => [queryOf(e)?.endsWith('\n\n_id=pz'), patientsOf(e)])).toEqual([[true, ['Patient/pz']], [true, ['Patient/pz']]]);
      } finally {
        await t.close();
      }
    });

    test('small batches sent chunked (no Content-Length) are counted as read, not as 4 MiB each: the ninth before a flush is audited entry by entry too', async () => {
      // No flush by the timer while the nine are sent: each one's request Bundle is held until the flush below.
      const { t, api } = await open(target, 'on', { CINDER_AUDIT_FLUSH_MS: '60000' });
      try {
        expect((await api.put('Patient/pc', { resourceType: 'Patient', id: 'pc' })).status).toBe(201);
        const read = new TextEncoder().encode(JSON.stringify({ resourceType: 'Bundle', type: 'batch', entry: [{ request: { method: 'GET', url: 'Patient/pc' } }] }));
        const token = await t.token();
        for (let i = 0; i < 9; i++) {
          const body = new ReadableStream<Uint8Array>({ start: (c) => { c.enqueue(read); c.close(); } });
          const res = await t.request(t.fhir(), { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' }, body });
          expect([i, res.status]).toEqual([i, 200]);
        }
        const all = await events(t, api);
        expect(all.filter((e) => subtypeOf(e) === 'batch')).toHaveLength(9);
        expect(all.filter((e) => subtypeOf(e) === 'read').map((e) => [whats(e)[0], patientsOf(e)[0]])).toEqual(Array(9).fill(['Patient/pc/_history/1', 'Patient/pc']));
      } finally {
        await t.close();
      }
    });

    test('a batch answered in Brotli (Content-Encoding: br), or in a list of codings, is read for its entries as a gzip one is', async () => {
      const { t, api } = await open(target, 'on');
      try {
        expect((await api.put('Patient/pr', { resourceType: 'Patient', id: 'pr' })).status).toBe(201);
        // The same server without a trail of its own, its answers coded as a proxy in front of it might code them,
        // behind this app's trail.
        const plain = createApp({ config: { ...t.config, audit: 'off' }, store: t.store, keys: t.keys, clock: t.clock, log: silentLogger, core: testCoreBundle(), exportSettleMs: 0 });
        const coded = (codings: string[]) => t.app.audit!.wrap(async (req) => {
          const res = await plain.fetch(req);
          let body = res.body!;
          for (const coding of codings) body = body.pipeThrough(new CompressionStream((coding === 'br' ? 'brotli' : coding) as CompressionFormat));
          const headers = new Headers(res.headers);
          headers.set('Content-Encoding', codings.join(', '));
          headers.delete('Content-Length');
          return new Response(body, { status: res.status, headers });
        });
        const read = { resourceType: 'Bundle', type: 'batch', entry: [{ request: { method: 'GET', url: 'Patient/pr' } }] };
        const token = await t.token();
        for (const codings of [['br'], ['gzip', 'br'], ['deflate']]) {
          const req = new Request(t.fhir(), { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' }, body: JSON.stringify(read) });
          const res = await coded(codings)(req);
          expect([codings, res.status, res.headers.get('content-encoding')]).toEqual([codings, 200, codings.join(', ')]);
          await res.arrayBuffer();
        }
        const all = await events(t, api);
        expect(all.filter((e) => subtypeOf(e) === 'batch').map((e) => whats(e))).toEqual([[], [], []]);
        expect(all.filter((e) => subtypeOf(e) === 'read').map((e) => [whats(e)[0], patientsOf(e)[0]])).toEqual(Array(3).fill(['Patient/pr/_history/1', 'Patient/pr']));
      } finally {
        await t.close();
      }
    });

    test('a batch or transaction too large to keep for its entries (over 4 MiB) names in its own event what it read and wrote, and their patients', async () => {
      const { t, api } = await open(target, 'on');
      try {
        expect((await api.put('Patient/pb', { resourceType: 'Patient', id: 'pb' })).status).toBe(201);
        const batch = { resourceType: 'Bundle', type: 'batch', entry: [
          { request: { method: 'GET', url: 'Patient/pb' } },
          { resource: { resourceType: 'Observation', status: 'final', code: { text: 'w' }, subject: { reference: 'Patient/pb' } }, request: { method: 'POST', url: 'Observation' } },
          { request: { method: 'GET', url: 'Observation?subject=Patient/pb' } },
        ] };
        // Padded past ENTRY_BUNDLE_CHARS with blanks, which JSON allows between tokens.
        const text = JSON.stringify(batch).replace('"entry":', `"entry":${' '.repeat(4 << 20)}`);
        const token = await t.token();
        // Its size declared, and not (chunked: counted as 4 MiB, and read up to that much).
        for (const length of [{ 'Content-Length': String(text.length) }, {}] as Record<string, string>[]) {
          const sent = await t.request(t.fhir(), { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json', ...length }, body: text });
          expect(sent.status).toBe(200);
        }
        const all = await events(t, api);
        const batches = all.filter((e) => subtypeOf(e) === 'batch');
        expect(batches.map((e) => whats(e).sort())).toEqual(Array(2).fill([expect.stringMatching(/^Observation\/[^/]+\/_history\/1$/), 'Patient/pb/_history/1']));
        expect(batches.map((e) => patientsOf(e))).toEqual([['Patient/pb'], ['Patient/pb']]);
        // A transaction as large names what it read too.
        const tx = JSON.stringify({ resourceType: 'Bundle', type: 'transaction', entry: [{ request: { method: 'GET', url: 'Patient/pb' } }] }).replace('"entry":', `"entry":${' '.repeat(4 << 20)}`);
        const sentTx = await t.request(t.fhir(), { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json', 'Content-Length': String(tx.length) }, body: tx });
        expect(sentTx.status).toBe(200);
        const [transaction] = (await events(t, api)).filter((e) => subtypeOf(e) === 'transaction');
        expect([whats(transaction!), patientsOf(transaction!)]).toEqual([['Patient/pb/_history/1'], ['Patient/pb']]);
        // Their entries are not audited each: the Bundle's event names them.
        expect(all.filter((e) => ['read', 'create', 'search'].includes(subtypeOf(e)) && !queryOf(e)?.includes('AuditEvent'))).toEqual([]);
      } finally {
        await t.close();
      }
    });

    test('a transaction in FHIR XML, answered in XML, is audited as a JSON one: the Bundle\'s event names what it wrote, each entry its own', async () => {
      const { t, api } = await open(target, 'on');
      try {
        const tx = await api.post('', toFhirXml({
          resourceType: 'Bundle', type: 'transaction', entry: [{ resource: { resourceType: 'Patient', id: 'px' }, request: { method: 'PUT', url: 'Patient/px' } }],
        }), { 'Content-Type': 'application/fhir+xml', Accept: 'application/fhir+xml' });
        expect([tx.status, tx.headers.get('content-type')]).toEqual([200, 'application/fhir+xml; charset=utf-8']);
        const all = await events(t, api);
        const [transaction] = all.filter((e) => subtypeOf(e) === 'transaction');
        expect(whats(transaction!)).toEqual(['Patient/px/_history/1']);
        expect(all.filter((e) => subtypeOf(e) === 'update').map((e) => [whats(e)[0], patientsOf(e)[0]])).toEqual([['Patient/px/_history/1', 'Patient/px']]);
      } finally {
        await t.close();
      }
    });

    test('a failed and a successful sign-in at the login page are audited', async () => {
      const { t, api } = await open(target, 'on');
      try {
        const c = await userClient(t);
        await testUser(t);
        expect((await signIn(t, { clientId: c.id }, 'alice', 'wrong password')).status).toBe(200);
        expect((await signIn(t, { clientId: c.id })).status).toBe(303);
        const logins = (await events(t, api)).filter((e) => e.subtype[0].code === '110122');
        expect(logins.map((e) => [e.outcome, e.outcomeDesc])).toEqual([['4', 'sign-in failed: alice'], ['0', 'signed in: alice']]);
        expect(logins[1]!.agent.find((a: Json) => a.requestor).who.reference).toBe('Patient/p1');
        expect((await events(t, api, 'agent=Patient/p1')).map((e) => e.id)).toEqual([logins[1]!.id]);
        expect(JSON.stringify(logins)).not.toContain('wrong password');
      } finally {
        await t.close();
      }
    });

    test('a throttled sign-in is audited as a failure', async () => {
      const { t, api } = await open(target, 'on', { CINDER_LOGIN_FAILURES_USER: '1' });
      try {
        const c = await userClient(t);
        await testUser(t);
        expect((await signIn(t, { clientId: c.id }, 'alice', 'wrong')).status).toBe(200);
        expect((await signIn(t, { clientId: c.id })).status).toBe(429);
        const logins = (await events(t, api)).filter((e) => e.subtype[0].code === '110122');
        expect(logins.map((e) => [e.outcome, e.outcomeDesc])).toEqual([['4', 'sign-in failed: alice'], ['4', 'sign-in failed: alice (throttled)']]);
      } finally {
        await t.close();
      }
    });

    test('AuditEvents are searchable, one per search of them, and cannot be updated or deleted', async () => {
      const { t, api } = await open(target, 'on');
      try {
        await api.put('Patient/p1', { resourceType: 'Patient', id: 'p1' });
        await api.put('Patient/p3', { resourceType: 'Patient', id: 'p3' });
        const first = await events(t, api, 'patient=p1&subtype=update&action=U&outcome=0&type=rest');
        expect(first).toHaveLength(1);
        expect((await events(t, api, 'entity=Patient/p1&subtype=update')).map((e) => e.id)).toEqual([first[0]!.id]);
        expect(await events(t, api, 'date=lt2020-01-01')).toEqual([]);
        const before = (await events(t, api)).length;
        const after = (await events(t, api)).length;
        expect(after).toBe(before + 1); // the previous search of AuditEvents, once; writing them audits nothing
        const id = first[0]!.id;
        expect((await api.put(`AuditEvent/${id}`, { ...first[0], outcome: '8' })).status).toBe(405);
        expect((await api.del(`AuditEvent/${id}`)).status).toBe(405);
        expect((await api.get(`AuditEvent/${id}`)).status).toBe(200);
        // A patient's token reads the AuditEvents of its compartment only if its scopes include AuditEvent.
        const own = fhirClient(t, await craftToken(t, 'patient/AuditEvent.rs', { patient: 'p1' }));
        const seen = (await own.search('AuditEvent?_count=1000')).entry.map((e: Json) => e.resource);
        expect(seen.length).toBeGreaterThan(0);
        for (const e of seen) expect(patientsOf(e)).toContain('Patient/p1');
        const other = fhirClient(t, await craftToken(t, 'patient/Patient.rs', { patient: 'p1' }));
        expect((await other.get('AuditEvent')).status).toBe(403);
      } finally {
        await t.close();
      }
    });

    test('closing the trail writes what is queued', async () => {
      const { t, api } = await open(target, 'on');
      try {
        await api.put('Patient/p1', { resourceType: 'Patient', id: 'p1' });
        await t.app.audit!.close();
        const bundle = await api.search('AuditEvent?subtype=update');
        expect(bundle.entry).toHaveLength(1);
      } finally {
        await t.close();
      }
    });

    test('a full queue drops new events, counted in /metrics, and the requests succeed', async () => {
      // No timed flush during the test (a minute), room for three events.
      const { t, api } = await open(target, 'on', { CINDER_AUDIT_FLUSH_MS: '60000', CINDER_AUDIT_QUEUE_MAX: '3' });
      try {
        await t.app.audit!.flush(); // the token request
        await api.put('Patient/p1', { resourceType: 'Patient', id: 'p1' });
        for (let i = 0; i < 5; i++) expect((await api.get('Patient/p1')).status).toBe(200);
        const metrics = await (await t.request('/metrics')).text();
        expect(metrics).toContain('cinder_audit_events_total{result="dropped"} 3');
        expect(metrics).toContain('cinder_audit_queue 3');
        await t.app.audit!.flush();
        expect(await (await t.request('/metrics')).text()).toContain('cinder_audit_events_total{result="written"} 4');
      } finally {
        await t.close();
      }
    });

    test('CINDER_AUDIT=off records nothing', async () => {
      const { t, api } = await open(target, 'off');
      try {
        expect(t.app.audit).toBeUndefined();
        await api.put('Patient/p1', { resourceType: 'Patient', id: 'p1' });
        await api.get('Patient/p1');
        expect(await events(t, api)).toEqual([]);
      } finally {
        await t.close();
      }
    });
  });
}
