/**
 * An `$import` kick-off checks its inputs' hosts (private addresses are refused) resolving each distinct host once,
 * several at a time, within an overall deadline: a slow resolver costs a kick-off of many inputs about one
 * resolution per host in parallel, not one per input in turn. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectOutcome } from '../helpers/fhir.ts';
import { RESOLVE_TIMEOUT_MS } from '../../src/fhir/subscriptions/endpoint.ts';
import { RESOLVE_CONCURRENCY, RESOLVE_DEADLINE_MS } from '../../src/import/kickoff.ts';

const params = (urls: string[]) => ({
  resourceType: 'Parameters',
  parameter: urls.map((url) => ({ name: 'input', part: [{ name: 'type', valueCode: 'Patient' }, { name: 'url', valueUri: url }] })),
});

await eachStore((kind, fresh) => describe(`$import kick-off host checks (${kind})`, () => {
  let t: TestApp;
  /** How each name resolves (set per test). */
  let answer: (host: string) => Promise<string[]>;
  const calls = new Map<string, number>();
  let inFlight = 0;
  let mostInFlight = 0;

  beforeAll(async () => {
    const resolveHost = async (host: string) => {
      calls.set(host, (calls.get(host) ?? 0) + 1);
      mostInFlight = Math.max(mostInFlight, ++inFlight);
      try {
        return await answer(host);
      } finally {
        inFlight--;
      }
    };
    t = await createTestApp({ store: await fresh(), resolveHost });
  });
  afterAll(() => t.close());
  const reset = () => {
    calls.clear();
    mostInFlight = 0;
  };
  /** A kick-off of `urls` by a client of its own (each may have only so many jobs waiting). */
  async function kickOff(urls: string[]): Promise<{ res: Response }> {
    const token = await t.tokenFor('t1', ['system/*.*']);
    return { res: await t.request(`${t.fhir()}/$import`, fhirInit(token, 'POST', params(urls))) };
  }

  test('200 inputs on 20 hosts with a slow resolver: each host resolved once, several at a time', async () => {
    reset();
    // No resolution answers until 16 are under way at once: one after another, the kick-off would reach its
    // deadline with one host asked (and the counts below fail), however fast the machine.
    const full = Promise.withResolvers<void>();
    answer = async () => {
      if (inFlight === RESOLVE_CONCURRENCY) full.resolve();
      await full.promise;
      return ['93.184.215.14'];
    };
    const urls = Array.from({ length: 200 }, (_, i) => `https://h${i % 20}.example/part-${i}.ndjson`);
    const { res } = await kickOff(urls);
    expect(res.status).toBe(202);
    expect(calls.size).toBe(20);
    expect([...calls.values()].every((n) => n === 1)).toBe(true);
    expect(mostInFlight).toBe(RESOLVE_CONCURRENCY);
  });

  test('the first input in order whose host is private is named, however fast each host answered', async () => {
    reset();
    // input[3]'s host answers late with a private address, input[10]'s at once with another.
    answer = async (host) => {
      if (host === 'late.example') return (await Bun.sleep(300), ['10.0.0.1']);
      if (host === 'quick.example') return ['192.168.1.1'];
      return (await Bun.sleep(20), ['93.184.215.14']);
    };
    const urls = Array.from({ length: 20 }, (_, i) => `https://h${i}.example/p.ndjson`);
    urls[3] = 'https://late.example/p.ndjson';
    urls[10] = 'https://quick.example/p.ndjson';
    urls[15] = 'https://late.example/again.ndjson';
    const { res } = await kickOff(urls);
    const body = await expectOutcome(res, 400);
    expect(body.issue[0].expression).toEqual(['input[3].url']);
    expect(body.issue[0].diagnostics).toContain('late.example resolves to 10.0.0.1');
    expect(calls.get('late.example')).toBe(1);
  });

  test('a resolver that never answers holds a kick-off of 1,000 hosts for the overall deadline, not 1,000 timeouts', async () => {
    reset();
    answer = () => new Promise<string[]>(() => undefined);
    const urls = Array.from({ length: 1000 }, (_, i) => `https://n${i}.example/p.ndjson`);
    const { res } = await kickOff(urls);
    // Not resolving is no reason to refuse (each fetch checks its host again).
    expect(res.status).toBe(202);
    // Each round of 16 gives up after the resolution's timeout (3 s); the deadline (5 s) ends the kick-off within
    // the second round: 32 hosts asked at most, on any machine (a slower one asks fewer), not 1,000.
    expect(calls.size).toBeGreaterThanOrEqual(RESOLVE_CONCURRENCY);
    expect(calls.size).toBeLessThanOrEqual(RESOLVE_CONCURRENCY * Math.ceil(RESOLVE_DEADLINE_MS / RESOLVE_TIMEOUT_MS));
  }, 30_000);
}));
