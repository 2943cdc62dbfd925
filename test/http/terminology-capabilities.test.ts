/**
 * `metadata?mode=terminology`: a TerminologyCapabilities of the code systems the terminology operations
 * know (HL7's terminology-server requirements): the FHIR R4 core ones to anyone, the tenant's own
 * CodeSystems too to a token of the tenant that may search them; valid R4, on both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { CoreBundle } from '../../src/terminology/core/core-bundle.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const GENDER = 'http://hl7.org/fhir/administrative-gender';

const codeSystem = (id: string, url: string, extra: Json = {}): Json => ({
  resourceType: 'CodeSystem', id, url, status: 'active', content: 'complete', concept: [{ code: 'a' }], ...extra,
});

/** The listing as `uri` -> version codes ('' for a code system listed without versions). */
function listed(tc: Json): Map<string, string[]> {
  return new Map((tc.codeSystem ?? []).map((cs: Json) => [cs.uri, (cs.version ?? []).map((v: Json) => v.code)]));
}

await eachStore((kind, fresh) => {
  describe(`metadata?mode=terminology on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    const metadata = (query: string, headers: Record<string, string> = {}) => t.request(`${t.fhir('t1')}/metadata${query}`, { headers });
    const terminology = async (headers: Record<string, string> = {}) => {
      const res = await metadata('?mode=terminology', headers);
      expect(res.status).toBe(200);
      return (await res.json()) as Json;
    };

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.put200(codeSystem('a1', 'http://example.org/cs/a', { version: '1' }));
      await api.put200(codeSystem('a2', 'http://example.org/cs/a', { version: '2' }));
      await api.put200(codeSystem('b', 'http://example.org/cs/b'));
      // Neither defines codes of its own: not listed.
      await api.put200({ resourceType: 'CodeSystem', id: 'c', url: 'http://example.org/cs/c', status: 'active', content: 'not-present' });
      await api.put200({ resourceType: 'CodeSystem', id: 's', url: 'http://example.org/cs/s', status: 'active', content: 'supplement', supplements: GENDER, concept: [{ code: 'male' }] });
      await api.put200(codeSystem('gone', 'http://example.org/cs/gone'));
      expect((await api.del('CodeSystem/gone')).ok).toBe(true);
    });
    afterAll(() => t.close());

    test('without a token: the core code systems that define codes, with their versions, in URL order', async () => {
      const tc = await terminology();
      expect(tc).toMatchObject({ resourceType: 'TerminologyCapabilities', status: 'active', kind: 'instance', implementation: { url: t.fhir('t1') } });
      const core = (await new CoreBundle().load()).all('CodeSystem').map((r) => JSON.parse(r.content) as Json);
      const defining = core.filter((cs) => ['complete', 'fragment', 'example'].includes(cs.content));
      const uris = tc.codeSystem.map((cs: Json) => cs.uri);
      expect(uris).toEqual([...new Set(defining.map((cs) => cs.url as string))].filter((u) => !u.includes('|')).sort());
      expect(listed(tc).get(GENDER)).toEqual(['4.0.1']);
      expect(listed(tc).has('http://hl7.org/fhir/CodeSystem/summary')).toBe(false); // not-present
      expect(listed(tc).has('http://hl7.org/fhir/CodeSystem/example-supplement')).toBe(false);
      expect(uris.some((u: string) => u.startsWith('http://example.org/'))).toBe(false);
      expect(tc.expansion.parameter.map((p: Json) => p.name)).toContain('filter');
      // ConceptMap/$translate finds maps by system when the client names none.
      expect(tc.translation).toEqual({ needsMap: false });
    });

    test("with the tenant's token: its CodeSystems too, each version, none that defines no codes or was deleted", async () => {
      const mine = [...listed(await terminology({ Authorization: `Bearer ${await t.token()}` }))].filter(([uri]) => uri.startsWith('http://example.org/'));
      expect(mine).toEqual([['http://example.org/cs/a', ['1', '2']], ['http://example.org/cs/b', []]]);
    });

    test("a token's scopes decide which of them it sees; another tenant's or a bad token is refused", async () => {
      const own = async (scope: string) => [...listed(await terminology({ Authorization: `Bearer ${await craftToken(t, scope)}` }))].map(([uri]) => uri).filter((u) => u.startsWith('http://example.org/'));
      expect(await own('system/ValueSet.rs')).toEqual([]);
      expect(await own('system/CodeSystem.rs?url=http://example.org/cs/b')).toEqual(['http://example.org/cs/b']);
      await expectOutcome(await metadata('?mode=terminology', { Authorization: 'Bearer not-a-token' }), 401);
      await expectOutcome(await metadata('?mode=terminology', { Authorization: `Bearer ${await craftToken(t, 'system/*.rs', { tenant: 't2' })}` }), 403);
    });

    test('it is a valid R4 TerminologyCapabilities', async () => {
      const tc = await terminology({ Authorization: `Bearer ${await t.token()}` });
      const res = await api.post('TerminologyCapabilities/$validate', tc);
      expect(res.status).toBe(200);
      const errors = ((await res.json()) as Json).issue.filter((i: Json) => i.severity === 'error' || i.severity === 'fatal');
      expect(errors).toEqual([]);
    });

    test("a code system whose url holds a '|' (R4's v2-0006|2.1 and three more) is not listed as a canonical but named in the description, and works where a system is a uri", async () => {
      await api.put200(codeSystem('piped', 'http://example.org/cs/p|1'));
      const PIPED = ['http://terminology.hl7.org/CodeSystem/v2-0006|2.1', 'http://terminology.hl7.org/CodeSystem/v2-0006|2.4', 'http://terminology.hl7.org/CodeSystem/v2-0391|2.4', 'http://terminology.hl7.org/CodeSystem/v2-0391|2.6'];
      const cases: [Json, string[]][] = [[await terminology(), PIPED], [await terminology({ Authorization: `Bearer ${await t.token()}` }), ['http://example.org/cs/p|1', ...PIPED]]];
      for (const [tc, unlisted] of cases) {
        expect(tc.codeSystem.filter((cs: Json) => cs.uri.includes('|'))).toEqual([]);
        expect([...(tc.description as string).matchAll(/`([^`]+)`/g)].map((m) => m[1])).toEqual(unlisted);
      }
      const X = encodeURIComponent(PIPED[0]!);
      const result = async (res: Response) => {
        expect(res.status).toBe(200);
        return ((await res.json()) as Json).parameter.find((p: Json) => p.name === 'result')?.valueBoolean;
      };
      // As a uri, as written: $lookup, a coding, a ValueSet's include ($expand, ValueSet/$validate-code).
      expect((await api.get(`CodeSystem/$lookup?system=${X}&code=A`)).status).toBe(200);
      const coding = { resourceType: 'Parameters', parameter: [{ name: 'coding', valueCoding: { system: PIPED[0], code: 'A' } }] };
      expect(await result(await api.post('CodeSystem/$validate-code', coding))).toBe(true);
      const VS = encodeURIComponent('http://terminology.hl7.org/ValueSet/v2-2.1-0006');
      const expansion = (await (await api.get(`ValueSet/$expand?url=${VS}`)).json()) as Json;
      expect(expansion.expansion.contains.find((c: Json) => c.code === 'A')).toMatchObject({ system: PIPED[0] });
      expect(await result(await api.get(`ValueSet/$validate-code?url=${VS}&system=${X}&code=A`))).toBe(true);
      // As a canonical, `|2.1` is a version: the url form cannot name it, as the listing could not (an unknown version).
      const canonical = (await (await api.get(`CodeSystem/$validate-code?url=${X}&code=A`)).json()) as Json;
      expect(canonical.parameter.find((p: Json) => p.name === 'result')?.valueBoolean).toBe(false);
      expect(canonical.parameter.find((p: Json) => p.name === 'x-caused-by-unknown-system')?.valueCanonical).toBe(PIPED[0]);
      expect((await api.get(`CodeSystem/$lookup?system=http://terminology.hl7.org/CodeSystem/v2-0006&version=2.1&code=A`)).status).toBe(404);
    });

    test('mode full, normative or none is the CapabilityStatement; another mode is a 400 naming it', async () => {
      for (const query of ['', '?mode=full', '?mode=normative']) {
        expect(((await (await metadata(query)).json()) as Json).resourceType).toBe('CapabilityStatement');
      }
      const outcome = await expectOutcome(await metadata('?mode=everything'), 400);
      expect(outcome.issue[0].expression).toEqual(['mode']);
    });
  });
});
