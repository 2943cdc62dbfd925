/**
 * A `_search` form's `_format` and `_pretty` (second review of issue #14): they are parameters of the
 * search as the URL's are (R4 http.html: `_format` on any interaction; search.html: a POST's form holds
 * the search's parameters), so the answer comes in the format the form asks, as its `self` link says,
 * and a format Cinder does not speak is the URL's 406.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { expectOutcome, fhirClient, link, type FhirClient } from '../helpers/fhir.ts';

describe('a _search form\'s _format and _pretty', () => {
  let t: TestApp;
  let api: FhirClient;

  beforeAll(async () => {
    t = await createTestApp();
    api = fhirClient(t, await t.token());
    await api.put200({ resourceType: 'Patient', id: 'fm-p', gender: 'female' });
  });
  afterAll(() => t.close());

  const post = (path: string, form: string, headers: Record<string, string> = {}) =>
    api.call('POST', path, form, { 'Content-Type': 'application/x-www-form-urlencoded', ...headers });

  test('_format=xml in the form answers FHIR XML, as its self link and the same search by GET do', async () => {
    for (const path of ['Patient/_search', '_search', 'Patient/fm-p/*/_search'.replace('/*', '/Patient')]) {
      const res = await post(path, `gender=female&_format=xml${path === '_search' ? '&_type=Patient' : ''}`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('application/fhir+xml; charset=utf-8');
      const text = await res.text();
      expect(text).toStartWith('<?xml');
      expect(text).toContain('<id value="fm-p"/>');
    }
    const json = await api.search('Patient?gender=female&_format=json');
    const self = await api.get(link(json, 'self')!.replace('_format=json', '_format=xml'));
    expect(self.headers.get('content-type')).toBe('application/fhir+xml; charset=utf-8');
    // The form's wins over Accept, as the URL's does.
    const accept = await post('Patient/_search', '_format=application/fhir%2Bxml', { Accept: 'application/fhir+json' });
    expect(accept.headers.get('content-type')).toBe('application/fhir+xml; charset=utf-8');
  });

  test('_pretty=true in the form indents the answer, JSON or XML', async () => {
    const res = await post('Patient/_search', 'gender=female&_pretty=true');
    expect(res.headers.get('content-type')).toBe('application/fhir+json; charset=utf-8');
    const text = await res.text();
    expect(text).toStartWith('{\n  "resourceType": "Bundle"');
    const xml = await (await post('Patient/_search', '_format=xml&_pretty=true')).text();
    expect(xml).toContain('\n  <id value=');
    const compact = await (await post('Patient/_search', '_pretty=false')).text();
    expect(compact).toStartWith('{"resourceType":"Bundle"');
  });

  test('_format=application/json in the form is labelled application/json', async () => {
    const res = await post('Patient/_search', '_format=application/json');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect((await res.json()).resourceType).toBe('Bundle');
  });

  test('a _format Cinder does not speak, in the form, is the 406 naming _format', async () => {
    const outcome = await expectOutcome(await post('Patient/_search', 'gender=female&_format=text/html'), 406);
    expect(outcome.issue[0].expression).toEqual(['_format']);
  });
});
