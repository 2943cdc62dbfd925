/**
 * `$convert` (R4 Resource-convert): a resource in JSON or XML (its Content-Type), or a Parameters
 * holding it as `input`, answered in the format asked for; validated as a create is, never stored.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, countVersions, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const PATIENT = { resourceType: 'Patient', id: 'c1', active: true, name: [{ family: 'Chalmers', given: ['Peter', 'James'] }], birthDate: '1974-12-25', _birthDate: { extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/patient-birthTime', valueDateTime: '1974-12-25T14:35:45-05:00' }] } };
const PATIENT_XML = '<Patient xmlns="http://hl7.org/fhir"><id value="c1"/><active value="true"/><name><family value="Chalmers"/><given value="Peter"/><given value="James"/></name><birthDate value="1974-12-25"><extension url="http://hl7.org/fhir/StructureDefinition/patient-birthTime"><valueDateTime value="1974-12-25T14:35:45-05:00"/></extension></birthDate></Patient>';

await eachStore((kind, fresh) => describe(`$convert (${kind})`, () => {
  let t: TestApp;
  let api: FhirClient;
  beforeAll(async () => {
    t = await createTestApp({ store: await fresh() });
    api = fhirClient(t, await t.token());
  });
  afterAll(() => t.close());

  const convert = (body: string, contentType: string, accept: string, token?: string) =>
    t.request(`${api.base}/$convert`, { method: 'POST', body, headers: { Authorization: `Bearer ${token ?? ''}`, 'Content-Type': contentType, Accept: accept } });

  test('JSON to XML and XML to JSON; by Accept or _format; a Parameters input is unwrapped; nothing is stored', async () => {
    const token = await t.token();
    const before = await countVersions(t);
    const toXml = await convert(JSON.stringify(PATIENT), 'application/fhir+json', 'application/fhir+xml', token);
    expect(toXml.status).toBe(200);
    expect(toXml.headers.get('content-type')).toStartWith('application/fhir+xml');
    expect(await toXml.text()).toContain(PATIENT_XML.slice(PATIENT_XML.indexOf('<id')));
    const toJson = await convert(PATIENT_XML, 'application/fhir+xml', 'application/fhir+json', token);
    expect(toJson.status).toBe(200);
    expect(toJson.headers.get('content-type')).toStartWith('application/fhir+json');
    expect(await toJson.json()).toEqual(PATIENT);
    const byFormat = await t.request(`${api.base}/$convert?_format=xml`, { method: 'POST', body: JSON.stringify(PATIENT), headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' } });
    expect(byFormat.headers.get('content-type')).toStartWith('application/fhir+xml');
    const wrapped = await api.post('$convert', { resourceType: 'Parameters', parameter: [{ name: 'input', resource: PATIENT }] });
    expect(await wrapped.json()).toEqual(PATIENT);
    // A Parameters that is not an `input` wrapper is itself the resource converted.
    const params = { resourceType: 'Parameters', parameter: [{ name: 'x', valueString: 'y' }] };
    expect(await (await api.post('$convert', params)).json()).toEqual(params);
    expect(await countVersions(t)).toBe(before);
    await expectOutcome(await api.get('Patient/c1'), 404);
  });

  test('JSON by default: an XML body with no format asked for (Accept */* or none) is answered in JSON', async () => {
    const token = await t.token();
    for (const accept of ['*/*', '']) {
      const res = await convert(PATIENT_XML, 'application/fhir+xml', accept, token);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toStartWith('application/fhir+json');
      expect(await res.json()).toEqual(PATIENT);
    }
    const asked = await convert(PATIENT_XML, 'application/fhir+xml', 'application/fhir+xml', token);
    expect(asked.headers.get('content-type')).toStartWith('application/fhir+xml');
  });

  test('an invalid resource is a 422 naming the element; not FHIR is a 400; only POST; any token of the tenant', async () => {
    const bad = await expectOutcome(await api.post('$convert', { resourceType: 'Patient', gender: 'bogus' }), 422);
    expect(bad.issue[0].expression).toEqual(['Patient.gender']);
    const unknown = await expectOutcome(await api.post('$convert', { resourceType: 'Patient', colour: 'blue' }), 422);
    expect(JSON.stringify(unknown.issue)).toContain('Patient.colour');
    const xml = await expectOutcome(await convert('<Patient xmlns="http://hl7.org/fhir"><active value="maybe"/></Patient>', 'application/fhir+xml', 'application/fhir+json', await t.token()), 400);
    expect(xml.issue[0].expression).toEqual(['Patient.active']);
    await expectOutcome(await convert('{"resourceType":', 'application/fhir+json', 'application/fhir+json', await t.token()), 400);
    await expectOutcome(await api.post('$convert', { resourceType: 'Parameters', parameter: [{ name: 'input', valueString: 'x' }] }), 400);
    const get = await api.get('$convert');
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
    // It reads and writes no data: a token with no resource scope of the tenant may call it.
    const narrow = fhirClient(t, await craftToken(t, 'system/Observation.rs'));
    expect((await narrow.post('$convert', PATIENT)).status).toBe(200);
    const patientToken = fhirClient(t, await craftToken(t, 'patient/Observation.rs', { patient: 'p1' }));
    expect((await patientToken.post('$convert', PATIENT)).status).toBe(200);
    expect((await t.request(`${api.base}/$convert`, { method: 'POST', body: JSON.stringify(PATIENT), headers: { 'Content-Type': 'application/fhir+json' } })).status).toBe(401);
  });
}));
