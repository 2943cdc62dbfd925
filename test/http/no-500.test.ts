import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';

/**
 * A deterministic sweep of odd requests over the FHIR routes: whatever the combination of method,
 * path, query, headers and body, the answer is never a 5xx. On both databases, since PostgreSQL
 * refuses values SQLite takes (each case of those is tested in control-characters.test.ts and
 * index-limits.test.ts; here a few of them are among the sweep's inputs).
 */
const TYPES = ['Patient', 'Patient', 'Patient', 'Observation', 'Observation', 'Foo', 'patient', '$x', '_history', '_search', 'metadata', 'Bundle', 'ValueSet', ''];
const IDS = ['1', 'p1', '1', 'p1', 'a_b', '%ZZ', '%00', 'x'.repeat(70), '$everything', '_history', '_search', '..', '-', '%2e%2e', '1/*'];
const QUERIES = [
  '', '?_count=5', '?_count=-1', '?_sort=_lastUpdated', '?identifier=a|b|c', '?identifier=\\', '?identifier=%5C%2C', '?subject=Patient/',
  '?subject=/1', '?subject=http://x/Patient/1', '?_lastUpdated=ge', '?_lastUpdated=2020-01-01T10:00:00.1234567890Z', '?_cursor=W10',
  '?_cursor=WyJhIiwxXQ', '?_since=2020', '?_at=x', '?_total=accurate&_summary=count', '?code:text=a', '?_id=,', '?_id=a,,b', '?url=%FF',
  '?version=\\|', '?patient:Patient=Group/1', '?_format=json&_pretty=true', '?subject:identifier=x|y', '?_has:Observation:subject:code=1',
  '?identifier=%E2%80%AE', '?_filter=name%20eq', '?_filter=(((', '?_filter=subject.name%20co%20%22x%22%20or%20not%20(gender%20eq%20male)',
  '?_filter=a[b%20eq%20c].d%20eq%20e', '?_type=Patient,Foo', '?_type=Observation&_sort=-_lastUpdated&_cursor=eyJ0Ijo5OSwiaSI6IngifQ',
];
const BODIES = [
  '', '{', '[]', 'null', '{"resourceType":"Patient"}', '{"resourceType":"Patient","id":"p1"}', '{"resourceType":"Patient","id":"1"}',
  '{"resourceType":"Bundle","type":"transaction","entry":[{"request":{"method":"GET","url":"Patient?_id=x&_count=zz"}}]}',
  '{"resourceType":"Bundle","type":"batch","entry":[null,1,"x",{"request":null},{"request":{"method":"POST","url":"Patient"},"resource":null},{"fullUrl":5,"request":{"method":"PUT","url":"Patient/1"},"resource":{"resourceType":"Patient","id":"1","link":[{"other":{"reference":5}}]}}]}',
  '{"resourceType":"Bundle","type":"transaction","entry":[{"request":{"method":"POST","url":"Patient","ifNoneExist":5},"resource":{"resourceType":"Patient"}},{"request":{"method":"PUT","url":"Patient?"},"resource":{"resourceType":"Patient"}}]}',
  '{"resourceType":"Bundle","type":"transaction","entry":[{"request":{"method":"POST","url":"Observation"},"resource":{"resourceType":"Observation","subject":{"reference":"Patient?identifier=x|"}}}]}',
  '{"resourceType":"Bundle","type":"transaction","entry":[{"request":{"method":"POST","url":"Observation"},"resource":{"resourceType":"Observation","subject":{"reference":"Foo?x=1"}}}]}',
  `{"resourceType":"Observation","code":{"coding":[{"system":5,"code":{"a":1}}]},"subject":{"reference":"Patient/${'x'.repeat(100)}"},"identifier":"notanarray"}`,
  '{"resourceType":"Patient","meta":{"versionId":{"x":1},"lastUpdated":5}}',
  '{"resourceType":"Patient","identifier":[null,1,{"value":5},{"system":null,"value":"x"}]}',
  '{"resourceType":"Bundle","type":"transaction","entry":[{"request":{"method":"DELETE","url":"Patient?identifier=zz"}},{"request":{"method":"GET","url":"Patient/1/_history"}},{"request":{"method":"GET","url":"http://cinder.test/tenants/t1/fhir/R4/Patient?_id=1"}}]}',
];
let letterSeed = 5;
/** Letters that do not compress: an identifier longer than PostgreSQL indexes. */
const LONG = Array.from({ length: 2600 }, () => String.fromCharCode(97 + ((letterSeed = (letterSeed * 1103515245 + 12345) & 0x7fffffff) % 26))).join('');
BODIES.push(
  `{"resourceType":"Patient","identifier":[{"system":"urn:x","value":"${LONG}"}]}`,
  '{"resourceType":"Patient","name":[{"family":"a\\ud800"}],"identifier":[{"system":"urn:\\udc00","value":"x"}]}',
  '{"resourceType":"Bundle","type":"batch","entry":[{"request":{"method":"GET","url":"Patient?identifier=a%00"}},{"request":{"method":"GET","url":"Patient?name=a\\u0001"}}]}',
);
QUERIES.push('?identifier=x%00', '?name=a%01', '?_tag=%00|x', `?identifier=urn:x|${LONG}`);
const METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS'];
const TYPES_CT = ['application/fhir+json', 'application/json', 'text/plain', 'application/x-www-form-urlencoded', ''];

await eachStore((kind, fresh) => {
  describe(`no 5xx (${kind})`, () => {
    let t: TestApp;
    let token: string;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), env: { CINDER_MAX_BODY_BYTES: '4096' } });
      token = await t.token();
    });
    afterAll(() => t.close());

    test('2000 odd requests, no 5xx', async () => {
      let seed = 20260115;
      const rnd = (n: number) => {
        seed = (seed * 1103515245 + 12345) & 0x7fffffff;
        return seed % n;
      };
      const pick = <T>(a: T[]): T => a[rnd(a.length)]!;
      const failures: string[] = [];
      const statuses = new Set<number>();
      for (let i = 0; i < 2000; i++) {
        // Every tenth request is a well-formed write, so the sweep also runs over stored data.
        const wellFormed = i % 10 === 0;
        const method = wellFormed ? pick(['POST', 'PUT']) : pick(METHODS);
        const history = rnd(4) === 0 ? `/_history${rnd(2) ? '/' + pick(['1', 'x', '%00']) : ''}` : '';
        const path = wellFormed ? (method === 'POST' ? '/Patient' : '/Patient/1') : `/${pick(TYPES)}${rnd(2) ? `/${pick(IDS)}` : ''}${history}${pick(QUERIES)}`;
        const headers: Record<string, string> = { Authorization: `Bearer ${token}` };
        // One well-formed write in three is sent as text/plain (a 415): the odd paths' writes mostly meet a 405 first.
        const ct = wellFormed ? (i % 30 === 0 ? 'text/plain' : 'application/fhir+json') : pick(TYPES_CT);
        if (ct) headers['Content-Type'] = ct;
        if (rnd(5) === 0) headers['If-Match'] = pick(['W/"1"', '*', '"x"', '']);
        if (rnd(5) === 0) headers['If-None-Exist'] = pick(['identifier=1', '', 'Foo?x=1', '_count=1', 'Patient?identifier=%']);
        if (rnd(5) === 0) headers.Prefer = pick(['return=minimal', 'handling=strict', 'return=OperationOutcome, handling=strict', '=,;']);
        const init: RequestInit = { method, headers };
        if (wellFormed) init.body = JSON.stringify({ resourceType: 'Patient', id: '1', identifier: [{ system: 'urn:x', value: String(rnd(5)) }] });
        else if (method !== 'GET' && method !== 'HEAD') init.body = pick(BODIES);
        const res = await t.request(t.fhir() + path, init);
        statuses.add(res.status);
        if (res.status >= 500) failures.push(`${method} ${path} ${JSON.stringify(headers)} ${String(init.body)} -> ${res.status} ${await res.text()}`);
      }
      expect(failures).toEqual([]);
      // The sweep reaches successes as well as each kind of refusal.
      for (const s of [200, 201, 400, 404, 405, 415]) expect(statuses).toContain(s);
    }, 60_000);

    test('forged paging cursors (search, $everything, history, system search) are a 400 naming _cursor: offsets and times past what the databases take, ids and types of any other shape', async () => {
      const cursor = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
      const put = await t.request(`${t.fhir()}/Patient/p1`, { method: 'PUT', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' }, body: '{"resourceType":"Patient","id":"p1"}' });
      expect(put.status).toBeLessThan(300);
      const forged = [
        `Location?_sort=name&_count=2&_cursor=${cursor({ o: 1e300 })}`,
        `Patient?_count=2&_cursor=${cursor({ o: 2 ** 60 })}`,
        `Patient?_count=2&_cursor=${cursor({ o: 1, c: 1e300 })}`,
        `Patient?_sort=_lastUpdated&_cursor=${cursor([1e300, 'x'])}`,
        `Patient?_sort=_lastUpdated&_cursor=${cursor([1, ['x']])}`,
        `Patient?_sort=_lastUpdated&_cursor=${cursor([1, 'x'.repeat(70)])}`,
        `Patient/$everything?_count=2&_cursor=${cursor({ t: 1, a: [] })}`,
        `Patient/$everything?_count=1&_cursor=${cursor({ t: 1, p: [] })}`,
        `Patient/p1/$everything?_cursor=${cursor({ t: 1e300 })}`,
        `Patient/p1/$everything?_cursor=${cursor({ t: 1, a: { x: 1 } })}`,
        `Patient/_history?_cursor=${cursor([1.5, 'Patient', 'x', 1])}`,
        `_history?_cursor=${cursor([1e20, 'Patient', 'x', 1])}`,
        `Patient/p1/_history?_cursor=${cursor([0, 'Patient', 'x', 2 ** 53])}`,
        `_history?_cursor=${cursor([0, 'NotAType', 'x', 1])}`,
        `?_type=Patient,Organization&_sort=_lastUpdated&_cursor=${cursor({ t: 0, i: 'x', u: 2 ** 63 })}`,
        `?_type=Patient,Organization&_sort=_lastUpdated&_cursor=${cursor({ t: 0, i: 'x', u: -1e300 })}`,
        `?_type=Patient,Organization&_cursor=${cursor({ t: 0, i: ['x'] })}`,
      ];
      for (const path of forged) {
        const res = await t.request(`${t.fhir()}/${path}`, { headers: { Authorization: `Bearer ${token}` } });
        const body = (await res.json()) as { issue: { expression?: string[] }[] };
        expect({ path, status: res.status, expression: body.issue[0]!.expression }).toEqual({ path, status: 400, expression: ['_cursor'] });
      }
      // $everything's _count is digits, as search's (0 is the count alone, as search's: everything-count.test.ts).
      for (const count of ['1e9', '0x10', ' 5', '-1']) {
        const res = await t.request(`${t.fhir()}/Patient/p1/$everything?_count=${encodeURIComponent(count)}`, { headers: { Authorization: `Bearer ${token}` } });
        expect({ count, status: res.status }).toEqual({ count, status: 400 });
      }
      expect((await t.request(`${t.fhir()}/Patient/p1/$everything?_count=99999999`, { headers: { Authorization: `Bearer ${token}` } })).status).toBe(200);
    });
  });
});
