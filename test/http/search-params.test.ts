import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { BASE, createTestApp, testClock, type TestApp } from '../helpers/app.ts';
import { craftToken, expectOutcome, fhirClient, ids, link, type FhirClient, type Json } from '../helpers/fhir.ts';

let t: TestApp;
let api: FhirClient;
const clock = testClock(Date.parse('2026-03-01T09:00:00Z'));
const base = `${BASE}/tenants/t1/fhir/R4`;
const LOINC = 'http://loinc.org';
const SNOMED = 'http://snomed.info/sct';

/** Odd identifier values: each must be found exactly, never error, never match anything else. */
const ODD: Record<string, string> = {
  sqlQuote: "' OR 1=1 --",
  percent: '%',
  underscore: '_',
  backslash: 'a\\b',
  doubleQuote: 'say "hi"',
  semicolon: "x'; DROP TABLE resources; --",
  unicode: 'Zoë-日本-😀',
  comma: 'a,b',
  pipe: 'x|y',
  dollar: 'a$b',
  spaces: '  padded  ',
};

async function found(query: string): Promise<string[]> {
  return ids(await api.search(query)).sort();
}

beforeAll(async () => {
  t = await createTestApp({ clock });
  api = fhirClient(t, await craftToken(t, 'system/*.*', { ttl: 365 * 86400 }));
  await api.put200({ resourceType: 'Patient', id: 'p1', identifier: [{ system: 'urn:mrn', value: '111' }, { system: 'urn:ssn', value: '999' }] });
  await api.put200({ resourceType: 'Patient', id: 'p2', identifier: [{ system: 'urn:mrn', value: '222' }] });
  await api.put200({ resourceType: 'Patient', id: 'p3', identifier: [{ value: '111' }] });
  for (const [id, value] of Object.entries(ODD)) {
    await api.put200({ resourceType: 'Patient', id: `odd-${id}`, identifier: [{ system: 'urn:odd', value }] });
  }
  const code = (system: string, c: string) => ({ coding: [{ system, code: c }] });
  await api.put200({ resourceType: 'Observation', id: 'o1', status: 'final', code: code(LOINC, '1234-5'), subject: { reference: 'Patient/p1' } });
  await api.put200({
    resourceType: 'Observation', id: 'o2', status: 'final',
    code: { coding: [{ system: LOINC, code: '1234-5' }, { system: SNOMED, code: '386661006' }] },
    subject: { reference: `${base}/Patient/p2` },
  });
  await api.put200({ resourceType: 'Observation', id: 'o3', status: 'final', code: code(LOINC, '1234-5'), subject: { reference: 'Group/g1' } });
  await api.put200({
    resourceType: 'Observation', id: 'o4', status: 'final', code: code(LOINC, '9999-9'),
    subject: { reference: 'Patient/p1' }, performer: [{ reference: 'Patient/p2' }],
  });
  await api.put200({ resourceType: 'Condition', id: 'c1', code: code(SNOMED, '44054006'), subject: { reference: 'Patient/p1' } });
  await api.put200({ resourceType: 'Condition', id: 'c2', code: code(SNOMED, '38341003'), subject: { reference: 'Patient/p2' } });
  await api.put200({ resourceType: 'ValueSet', id: 'vs1', status: 'active', url: 'http://example.org/vs/a', version: '1.0' });
  await api.put200({ resourceType: 'ValueSet', id: 'vs2', status: 'active', url: 'http://example.org/vs/a', version: '2.0' });
  await api.put200({ resourceType: 'ValueSet', id: 'vs3', status: 'active', url: 'http://example.org/vs/b', version: '1.0' });
  await api.put200({ resourceType: 'CodeSystem', id: 'cs1', status: 'active', content: 'complete', url: 'http://example.org/cs/c', version: '1' });
  await api.put200({ resourceType: 'CodeSystem', id: 'cs2', status: 'active', content: 'complete', url: 'http://example.org/cs/c', version: '2' });
  // Organizations written at known instants, for _lastUpdated.
  for (const [id, at] of [
    ['org-a', '2026-03-01T10:00:00.000Z'],
    ['org-b', '2026-03-01T10:00:00.500Z'],
    ['org-c', '2026-03-01T10:00:01.000Z'],
    ['org-d', '2026-03-02T00:00:00.000Z'],
    ['org-e', '2026-04-01T00:00:00.000Z'],
  ] as const) {
    clock.set(Date.parse(at));
    await api.put200({ resourceType: 'Organization', id, name: id });
  }
  // A deleted Patient must never be found.
  await api.put200({ resourceType: 'Patient', id: 'p-deleted', identifier: [{ system: 'urn:mrn', value: '111' }] });
  await api.del('Patient/p-deleted');
});
afterAll(() => t.close());

describe('_id', () => {
  test('one id, several ids (OR), repeated parameter (AND)', async () => {
    expect(await found('Patient?_id=p1')).toEqual(['p1']);
    expect(await found('Patient?_id=p1,p2,nope')).toEqual(['p1', 'p2']);
    expect(await found('Patient?_id=p1,p2&_id=p2,p3')).toEqual(['p2']);
    expect(await found('Patient?_id=p1&_id=p2')).toEqual([]);
    expect(await found('Patient?_id=p-deleted')).toEqual([]);
    expect(await found('Observation?_id=p1')).toEqual([]);
  });

  test('a malformed id is 400, a modifier on _id is 400', async () => {
    await expectOutcome(await api.get(`Patient?_id=${encodeURIComponent("' OR 1=1 --")}`), 400);
    await expectOutcome(await api.get('Patient?_id:missing=true'), 400);
  });
});

describe(':missing', () => {
  test('is a 400 naming the parameter on _id, _lastUpdated, _text, _content, _list and _filter, under any handling; other parameters take it', async () => {
    for (const name of ['_id', '_lastUpdated', '_text', '_content', '_list', '_filter']) {
      for (const prefer of ['handling=lenient', 'handling=strict']) {
        const body = await expectOutcome(await api.get(`Patient?${name}:missing=true`, { Prefer: prefer }), 400);
        expect(body.issue[0].expression).toEqual([`${name}:missing`]);
      }
    }
    expect(await found('Patient?_tag:missing=false&_id=p1')).toEqual([]);
    expect((await api.get('Location?near:missing=true', { Prefer: 'handling=strict' })).status).toBe(200);
  });
});

describe('_lastUpdated', () => {
  const cases: [string, string[]][] = [
    ['2026-03-01', ['org-a', 'org-b', 'org-c']],
    ['eq2026-03-01', ['org-a', 'org-b', 'org-c']],
    ['eq2026-03-01T10:00:00Z', ['org-a', 'org-b']],
    ['eq2026-03-01T10:00:00.500Z', ['org-b']],
    ['eq2026-03-01T11:00:00%2B01:00', ['org-a', 'org-b']],
    ['eq2026-03-01T10:00Z', ['org-a', 'org-b', 'org-c']],
    ['eq2026-03', ['org-a', 'org-b', 'org-c', 'org-d']],
    ['eq2026', ['org-a', 'org-b', 'org-c', 'org-d', 'org-e']],
    ['ne2026-03', ['org-e']],
    ['gt2026-03-01', ['org-d', 'org-e']],
    ['gt2026-03-01T10:00:00Z', ['org-c', 'org-d', 'org-e']],
    ['ge2026-03-01T10:00:01Z', ['org-c', 'org-d', 'org-e']],
    ['ge2026-03-02', ['org-d', 'org-e']],
    ['lt2026-03-01T10:00:01Z', ['org-a', 'org-b']],
    ['lt2026-03-01', []],
    ['le2026-03-01T10:00:00Z', ['org-a', 'org-b']],
    ['le2026-03-02', ['org-a', 'org-b', 'org-c', 'org-d']],
  ];
  for (const [value, expected] of cases) {
    test(`_lastUpdated=${value}`, async () => {
      expect(await found(`Organization?_lastUpdated=${value}`)).toEqual(expected);
    });
  }

  test('two bounds are ANDed', async () => {
    expect(await found('Organization?_lastUpdated=ge2026-03-01T10:00:00.500Z&_lastUpdated=lt2026-03-02')).toEqual(['org-b', 'org-c']);
  });

  for (const bad of ['yesterday', 'gt', 'xx2026-03-01', '2026-13-01', '2026-02-30', '2026-03-01T25:00:00Z', '2026-03-01T10:00:00+25:00']) {
    test(`_lastUpdated=${bad} is 400`, async () => {
      await expectOutcome(await api.get(`Organization?_lastUpdated=${bad}`), 400);
    });
  }

  test('_lastUpdated= (no value) is ignored (R4 search.html: "Empty parameters are not an error")', async () => {
    expect(await found('Organization?_lastUpdated=')).toEqual(await found('Organization'));
    expect(await found('Organization?_lastUpdated=&_lastUpdated=lt2026-03-01T10:00:01Z')).toEqual(['org-a', 'org-b']);
  });
});

describe('identifier (token)', () => {
  test('code, system|code, |code, system|', async () => {
    expect(await found('Patient?identifier=111')).toEqual(['p1', 'p3']);
    expect(await found('Patient?identifier=urn:mrn|111')).toEqual(['p1']);
    expect(await found('Patient?identifier=|111')).toEqual(['p3']);
    expect(await found('Patient?identifier=urn:mrn|')).toEqual(['p1', 'p2']);
    expect(await found('Patient?identifier=urn:ssn|111')).toEqual([]);
  });

  test('comma is OR, repetition is AND', async () => {
    expect(await found('Patient?identifier=urn:mrn|111,urn:mrn|222')).toEqual(['p1', 'p2']);
    expect(await found('Patient?identifier=urn:mrn|111&identifier=urn:ssn|999')).toEqual(['p1']);
    expect(await found('Patient?identifier=urn:mrn|111&identifier=urn:mrn|222')).toEqual([]);
  });

  for (const [name, value] of Object.entries(ODD)) {
    test(`an identifier value with ${name} matches exactly`, async () => {
      const escaped = value.replace(/[\\,|$]/g, (ch) => '\\' + ch);
      expect(await found(`Patient?identifier=${encodeURIComponent(`urn:odd|${escaped}`)}`)).toEqual([`odd-${name}`]);
    });
  }

  test('metacharacters never widen a match', async () => {
    // None of these is a stored value; each is a wildcard or a fragment of one.
    for (const probe of ["'", 'a%25', '%25%25', '_%25', 'Zo%C3%AB', '*', '.*', "1' OR '1'='1", 'OR%201%3D1', '%5C', 'a%5Cb%25']) {
      const bundle = await api.search(`Patient?identifier=${probe}`);
      expect(ids(bundle)).toEqual([]);
    }
  });
});

describe('code (token) on Observation and Condition', () => {
  test('system|code, code, OR', async () => {
    expect(await found(`Observation?code=${LOINC}|1234-5`)).toEqual(['o1', 'o2', 'o3']);
    expect(await found('Observation?code=9999-9')).toEqual(['o4']);
    expect(await found(`Observation?code=${SNOMED}|386661006`)).toEqual(['o2']);
    expect(await found(`Observation?code=${SNOMED}|1234-5`)).toEqual([]);
    expect(await found(`Condition?code=${SNOMED}|44054006,${SNOMED}|38341003`)).toEqual(['c1', 'c2']);
    expect(await found(`Condition?code=${SNOMED}|`)).toEqual(['c1', 'c2']);
  });

  test('code and subject are ANDed', async () => {
    expect(await found(`Observation?code=${LOINC}|1234-5&subject=Patient/p1`)).toEqual(['o1']);
  });
});

describe('patient / subject (reference)', () => {
  test('Type/id, bare id, absolute URL, :Type modifier', async () => {
    expect(await found('Observation?subject=Patient/p1')).toEqual(['o1', 'o4']);
    expect(await found('Observation?subject=p1')).toEqual(['o1', 'o4']);
    expect(await found('Observation?patient=p1')).toEqual(['o1', 'o4']);
    expect(await found('Observation?patient=Patient/p1')).toEqual(['o1', 'o4']);
    expect(await found(`Observation?subject=${base}/Patient/p2`)).toEqual(['o2']);
    expect(await found('Observation?subject=Patient/p2')).toEqual(['o2']);
    expect(await found('Observation?subject:Patient=p1')).toEqual(['o1', 'o4']);
    expect(await found('Observation?subject:Group=g1')).toEqual(['o3']);
    expect(await found('Observation?subject:Patient=g1')).toEqual([]);
    expect(await found('Observation?subject=Group/g1')).toEqual(['o3']);
    expect(await found('Observation?patient=g1')).toEqual([]);
    expect(await found('Observation?subject=Patient/p1,Patient/p2')).toEqual(['o1', 'o2', 'o4']);
    expect(await found('Condition?patient=p1')).toEqual(['c1']);
    expect(await found('Condition?subject=Patient/p2')).toEqual(['c2']);
  });

  test('patient is subject restricted to Patient: other reference types never match it', async () => {
    expect(await found('Observation?patient=Group/g1')).toEqual([]);
    expect(await found('Observation?patient=Patient/p2,Group/g1')).toEqual(['o2']);
    expect(await found('Observation?patient:Patient=p1')).toEqual(['o1', 'o4']);
    expect(await found('Observation?patient=p1&subject=Patient/p1')).toEqual(['o1', 'o4']);
  });

  test('where R4 defines patient and subject by one expression, both find every reference type', async () => {
    await api.put200({ resourceType: 'DeviceUseStatement', id: 'd1', status: 'active', subject: { reference: 'Group/g1' }, device: { reference: 'Device/x' } });
    await api.put200({ resourceType: 'DeviceUseStatement', id: 'd2', status: 'active', subject: { reference: 'Patient/p1' }, device: { reference: 'Device/x' } });
    expect(await found('DeviceUseStatement?patient=Group/g1')).toEqual(['d1']);
    expect(await found('DeviceUseStatement?subject=Group/g1')).toEqual(['d1']);
    expect(await found('DeviceUseStatement?patient=p1')).toEqual(['d2']);
    await api.put200({ resourceType: 'EnrollmentRequest', id: 'e1', candidate: { reference: 'Patient/p2' } });
    expect(await found('EnrollmentRequest?subject=Patient/p2')).toEqual(['e1']);
    expect(await found('EnrollmentRequest?patient=p2')).toEqual(['e1']);
    expect(await found('EnrollmentRequest?subject=p1')).toEqual([]);
  });

  test('the performer reference does not make p2 the subject', async () => {
    expect(await found('Observation?patient=p2')).toEqual(['o2']);
  });

  test('an unknown type modifier or a malformed reference is 400', async () => {
    await expectOutcome(await api.get('Observation?subject:Nonsense=p1'), 400);
    await expectOutcome(await api.get('Observation?patient:Group=g1'), 400);
    // A type the parameter does not refer to, with or without a chain (Observation.subject: Group, Device, Patient, Location).
    for (const key of ['subject:Organization', 'subject:Organization.name', 'patient:Group.name']) {
      const body = await expectOutcome(await api.get(`Observation?${key}=acme`), 400, 'invalid');
      expect(body.issue[0].expression).toEqual([key]);
      expect(body.issue[0].details.text).toContain(`does not refer to ${key.split(/[:.]/)[1]}`);
    }
    await expectOutcome(await api.get('Observation?subject:missing=maybe'), 400);
    await expectOutcome(await api.get(`Observation?subject=${encodeURIComponent("' OR 1=1 --")}`), 400);
  });
});

describe('url and version on canonical resources', () => {
  test('url matches exactly; version narrows', async () => {
    expect(await found('ValueSet?url=http://example.org/vs/a')).toEqual(['vs1', 'vs2']);
    expect(await found('ValueSet?url=http://example.org/vs/a&version=2.0')).toEqual(['vs2']);
    expect(await found('ValueSet?version=1.0')).toEqual(['vs1', 'vs3']);
    expect(await found('ValueSet?url=http://example.org/vs')).toEqual([]);
    expect(await found('ValueSet?url=http://example.org/vs/%25')).toEqual([]);
    expect(await found('CodeSystem?url=http://example.org/cs/c&version=2')).toEqual(['cs2']);
    expect(await found('CodeSystem?url=http://example.org/vs/a')).toEqual([]);
  });
});

describe('unknown parameters', () => {
  test('lenient (default): ignored, reported in an outcome entry, left out of the self link', async () => {
    const bundle = await api.search('Patient?_id=p1&foo=bar&_query=x');
    expect(ids(bundle)).toEqual(['p1']);
    const outcome = bundle.entry.find((e: Json) => e.search.mode === 'outcome');
    expect(outcome.resource.resourceType).toBe('OperationOutcome');
    expect(outcome.resource.issue.map((i: Json) => i.severity)).toEqual(['warning', 'warning']);
    expect(outcome.resource.issue.map((i: Json) => i.expression[0])).toEqual(['foo', '_query']);
    expect(link(bundle, 'self')).toBe(`${base}/Patient?_id=p1`);
  });

  test('Prefer: handling=lenient behaves as the default', async () => {
    const res = await api.get('Patient?_id=p1&foo=bar', { Prefer: 'handling=lenient' });
    expect(res.status).toBe(200);
  });

  test('Prefer: handling=strict makes them 400', async () => {
    const res = await api.get('Patient?_id=p1&foo=bar', { Prefer: 'handling=strict' });
    const body = await expectOutcome(res, 400);
    expect(body.issue[0].expression).toEqual(['foo']);
    expect((await api.get('Patient?_id=p1', { Prefer: 'handling=strict' })).status).toBe(200);
  });

  test('known parameters of another type are unknown here', async () => {
    const bundle = await api.search('Patient?code=x');
    expect(bundle.entry.some((e: Json) => e.search.mode === 'outcome')).toBe(true);
  });
});

describe('invalid result parameters are 400', () => {
  for (const q of ['_count=-1', '_count=abc', '_count=1.5', '_sort=nonsense', '_sort=-', '_sort=identifier:text', '_sort=gender-nope', 'name:nonsense=x', 'birthdate=yesterday', 'name:missing=maybe', '_cursor=not-a-cursor', `_cursor=${btoa('{"a":1}')}`, '_total=lots', '_summary=banana', 'identifier=|']) {
    test(q, async () => {
      await expectOutcome(await api.get(`Patient?${q}`), 400);
    });
  }

  test('an unknown type is 404', async () => {
    await expectOutcome(await api.get('Nonsense?_id=1'), 404);
  });
});
