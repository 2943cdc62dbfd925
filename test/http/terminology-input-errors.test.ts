import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { operatorAccess } from '../../src/fhir/access.ts';
import { putVersion } from '../../src/fhir/crud.ts';
import type { Resource } from '../../src/fhir/resource.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { ANIMALS, errorIssue, getOperation, outcome, type OperationResponse, postOperation, putTerminologyFixtures, VS } from '../helpers/terminology-http.ts';

let t: TestApp;
let token: string;

beforeAll(async () => {
  t = await createTestApp();
  token = await t.token();
  await putTerminologyFixtures(t, token);
});
afterAll(() => t.close());

/** JSON text of `levels` concepts (or expansion entries) each nested in the one before; too deep for JSON.stringify. */
function nested(key: 'concept' | 'contains', levels: number, extra = ''): string {
  const open = Array.from({ length: levels }, (_, i) => `{"code":"c${i}"${extra},"${key}":[`).join('');
  return `${open}{"code":"leaf"${extra}}${']}'.repeat(levels)}`;
}

async function postText(path: string, body: string): Promise<OperationResponse> {
  const res = await t.request(`${t.fhir()}/${path}`, fhirInit(token, 'POST', body));
  return { status: res.status, body: (await res.json()) as OperationResponse['body'] };
}

describe('deeply nested resources are a 400, not a stack overflow', () => {
  test('an inline CodeSystem nested 10,000 levels deep', async () => {
    const body = `{"resourceType":"Parameters","parameter":[{"name":"codeSystem","resource":{"resourceType":"CodeSystem","url":"http://x","concept":[${nested('concept', 10_000)}]}},{"name":"code","valueCode":"leaf"}]}`;
    const issue = errorIssue(await postText('CodeSystem/$validate-code', body), 400);
    expect(issue).toEqual({ severity: 'error', code: 'invalid', text: 'The request body nests deeper than 1000 levels' });
  });

  test('an inline ValueSet expansion nested 10,000 levels deep', async () => {
    const contains = nested('contains', 10_000, ',"system":"http://x"');
    const body = `{"resourceType":"Parameters","parameter":[{"name":"valueSet","resource":{"resourceType":"ValueSet","expansion":{"contains":[${contains}]}}},{"name":"code","valueCode":"leaf"},{"name":"system","valueUri":"http://x"}]}`;
    expect(errorIssue(await postText('ValueSet/$validate-code', body), 400).text).toContain('nests deeper than 1000 levels');
  });

  test('a CodeSystem nested too deep is not stored, and one stored before the bound fails the operations that use it with a 400', async () => {
    const url = 'http://cinder.test/CodeSystem/deep';
    const cs = `{"resourceType":"CodeSystem","id":"deep","url":"${url}","status":"draft","content":"complete","concept":[${nested('concept', 600)}]}`;
    const put = await t.request(`${t.fhir()}/CodeSystem/deep`, fhirInit(token, 'PUT', cs));
    expect(put.status).toBe(400);
    expect(((await put.json()) as { issue: { diagnostics: string }[] }).issue[0]!.diagnostics).toBe('The request body nests deeper than 1000 levels');
    // Written before writes were bounded (straight to the store here).
    await t.store.resources.write('t1', (w) => putVersion(w, JSON.parse(cs) as Resource, 'deep', { now: t.clock.now(), access: operatorAccess }, 'PUT'));
    const issue = errorIssue(await getOperation(t, token, 'CodeSystem/$validate-code', { url, code: 'leaf' }), 400);
    expect(issue.text).toBe('CodeSystem/deep nests deeper than 1000 levels');
  });

  test('500 levels of nested concepts are fine', async () => {
    const body = `{"resourceType":"Parameters","parameter":[{"name":"codeSystem","resource":{"resourceType":"CodeSystem","url":"http://x","concept":[${nested('concept', 450)}]}},{"name":"code","valueCode":"leaf"}]}`;
    expect(outcome(await postText('CodeSystem/$validate-code', body)).result).toBe(true);
  });
});

describe('inputs that used to be ignored silently', () => {
  test("CodeSystem/$validate-code: an inline 'codeSystem' is used when 'url' names it, refused when 'url' names another", async () => {
    const inline = { resourceType: 'CodeSystem', url: ANIMALS, content: 'complete', concept: [{ code: 'griffin', display: 'Griffin' }] };
    const same = await postOperation(t, token, 'CodeSystem/$validate-code', [
      { name: 'url', valueUri: ANIMALS },
      { name: 'codeSystem', resource: inline },
      { name: 'code', valueCode: 'griffin' },
    ]);
    expect(outcome(same)).toEqual({ result: true, display: 'Griffin' });
    const other = await postOperation(t, token, 'CodeSystem/$validate-code', [
      { name: 'url', valueUri: 'http://cinder.test/CodeSystem/colors' },
      { name: 'codeSystem', resource: inline },
      { name: 'code', valueCode: 'griffin' },
    ]);
    expect(errorIssue(other, 400).text).toBe(`'url' is 'http://cinder.test/CodeSystem/colors', but the inline 'codeSystem' has the url '${ANIMALS}'`);
    const nameless = await postOperation(t, token, 'CodeSystem/$validate-code', [
      { name: 'codeSystem', resource: { resourceType: 'CodeSystem', concept: [{ code: 'a' }] } },
      { name: 'code', valueCode: 'a' },
    ]);
    expect(errorIssue(nameless, 400).text).toBe("the inline 'codeSystem' has no url; give 'url' or a coding with a system");
  });

  test('CodeSystem/$validate-code takes the system from the first coding of a codeableConcept that has one', async () => {
    const r = await postOperation(t, token, 'CodeSystem/$validate-code', [
      { name: 'codeableConcept', valueCodeableConcept: { coding: [{ code: 'x' }, { system: ANIMALS, code: 'dog' }] } },
    ]);
    expect(outcome(r)).toEqual({ result: true, display: 'Dog', message: 'codeableConcept.coding[0] has no system' });
  });

  test("$lookup: 'system' next to a 'coding' is a 400", async () => {
    const r = await postOperation(t, token, 'CodeSystem/$lookup', [
      { name: 'coding', valueCoding: { system: ANIMALS, code: 'dog' } },
      { name: 'system', valueUri: 'http://cinder.test/CodeSystem/colors' },
    ]);
    expect(errorIssue(r, 400).text).toBe("'system' goes with 'code'; a 'coding' carries its own system");
  });

  test('the ValueSet of an instance-level $expand is checked against url too', async () => {
    const r = await getOperation(t, token, 'ValueSet/mammals/$expand', { url: `${VS}pets` });
    expect(errorIssue(r, 400).text).toBe(`'url' is '${VS}pets', but ValueSet/mammals has the url '${VS}mammals'`);
  });
});

describe('a parameter an operation does not take: ignored, or a 400 naming it under Prefer: handling=strict', () => {
  const OPERATIONS: [string, Record<string, string>, string][] = [
    ['ValueSet/$expand', { url: `${VS}all-animals` }, 'includeDefinition'],
    ['ValueSet/$validate-code', { url: `${VS}all-animals`, system: ANIMALS, code: 'animal' }, 'context'],
    ['CodeSystem/$validate-code', { url: ANIMALS, code: 'animal' }, 'systemVersion'],
    ['CodeSystem/$lookup', { system: ANIMALS, code: 'animal' }, 'useSupplement'],
  ];
  const send = async (method: 'GET' | 'POST', path: string, query: Record<string, string>, prefer: string, body?: unknown) => {
    const init = fhirInit(token, method, body === undefined ? undefined : JSON.stringify(body));
    const res = await t.request(`${t.fhir()}/${path}?${new URLSearchParams(query)}`, { ...init, headers: { ...(init.headers as Record<string, string>), Prefer: prefer } });
    return { status: res.status, body: (await res.json()) as { issue?: { code: string; diagnostics: string; expression: string[] }[] } };
  };
  const parameters = (query: Record<string, string>) => ({ resourceType: 'Parameters', parameter: Object.entries(query).map(([name, value]) => ({ name, valueString: value })) });

  test.each(OPERATIONS)('%s, by GET and by POST', async (path, inputs, unsupported) => {
    for (const name of [unsupported, 'nonsense']) {
      const extra = { ...inputs, [name]: 'true' };
      for (const [method, query, body] of [['GET', extra, undefined], ['POST', {}, parameters(extra)]] as const) {
        expect((await send(method, path, query, 'handling=lenient', body)).status).toBe(200);
        const strict = await send(method, path, query, 'handling=strict', body);
        expect(strict.status).toBe(400);
        expect(strict.body.issue![0]).toMatchObject({ code: 'not-supported', expression: [name], diagnostics: `'${name}' is not a parameter of ${path}` });
      }
    }
    // The interaction's own parameters are not the operation's, and are taken.
    expect((await send('GET', path, { ...inputs, _format: 'json', _pretty: 'true' }, 'handling=strict')).status).toBe(200);
    // A POST's inputs are its body's: one in its URL is not read, and said so when strict.
    expect((await send('POST', path, { count: '1' }, 'handling=lenient', parameters(inputs))).status).toBe(200);
    const inUrl = await send('POST', path, { count: '1', _format: 'json' }, 'handling=strict', parameters(inputs));
    expect(inUrl.status).toBe(400);
    expect(inUrl.body.issue![0]).toMatchObject({ code: 'not-supported', expression: ['count'] });
  });
});
