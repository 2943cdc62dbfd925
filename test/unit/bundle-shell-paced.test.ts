/**
 * A large transaction or batch Bundle's own problems found a chunk of entries at a time with turns of the
 * event loop (pacedShellErrors, src/fhir/bundle-shell.ts): the same issues, in the same order, as one
 * validation of the whole (shellErrors), whatever breaks where: entries, the invariants over entries (bdl-7
 * across chunks too), the Bundle's own elements before and after `entry`, element ids (given again across
 * chunks, read with turns too), more than MAX_ISSUES.
 */
import { describe, expect, test } from 'bun:test';
import { pacedShellErrors, SHELL_CHUNK, shellErrors } from '../../src/fhir/bundle-shell.ts';
import type { Resource } from '../../src/fhir/resource.ts';

type Json = Record<string, unknown>;
const n = SHELL_CHUNK * 3 + 7;

function entry(i: number): Json {
  return {
    fullUrl: `urn:uuid:00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
    resource: { resourceType: 'Patient', name: [{ family: `P${i}` }] },
    request: { method: 'POST', url: 'Patient' },
  };
}

/** A transaction (or `type`) of n entries, each changed by `change` (which may break it), around `extra` members. */
function bundle(change: (e: Json, i: number) => void = () => {}, extra: Json = {}, type = 'transaction'): Resource {
  const entries = Array.from({ length: n }, (_, i) => {
    const e = entry(i);
    change(e, i);
    return e;
  });
  return { resourceType: 'Bundle', type, ...extra, entry: entries } as unknown as Resource;
}

const CASES: Record<string, () => Resource> = {
  valid: () => bundle(),
  'a batch': () => bundle(() => {}, {}, 'batch'),
  'bad entries in several chunks': () => bundle((e, i) => {
    if (i % 997 === 3) (e.request as Json).method = 'FETCH';
    if (i === n - 1) e.bogus = 1;
  }),
  'bdl-7 across chunks and within one': () => bundle((e, i) => {
    if (i === n - 2) e.fullUrl = entry(5).fullUrl;
    if (i === 12) e.fullUrl = entry(11).fullUrl;
  }),
  'bdl-7 only across chunks': () => bundle((e, i) => {
    if (i === SHELL_CHUNK + 1) e.fullUrl = entry(0).fullUrl;
  }),
  'one fullUrl, different versions across chunks': () => bundle((e, i) => {
    if (i === SHELL_CHUNK * 2) {
      e.fullUrl = entry(1).fullUrl;
      (e.resource as Json).meta = { versionId: '2' };
    }
  }),
  'a fullUrl that is not a string, the same in two chunks (bdl-7 reads no string there)': () => bundle((e, i) => {
    if (i === 3 || i === SHELL_CHUNK + 3) e.fullUrl = 5;
    if (i === 4 || i === SHELL_CHUNK * 2 + 4) e.fullUrl = { value: 'urn:uuid:x' };
  }),
  'bdl-2, bdl-3 and bdl-4 in the last chunk': () => bundle((e, i) => {
    if (i === n - 3) e.search = { mode: 'match' };
    if (i === n - 2) delete e.request;
    if (i === n - 1) e.response = { status: '200' };
  }),
  "the Bundle's own elements before and after entry": () => {
    const b = bundle((e, i) => {
      if (i === 2000) (e.request as Json).url = 7;
    }, { meta: { lastUpdated: 'yesterday' }, total: 3 }) as Json;
    return { ...b, link: [{ relation: 'next', url: 'a' }, { relation: 'next', url: 'b' }], unknownAfter: true } as unknown as Resource;
  },
  'everything at once: own elements around entry, entries, invariants across chunks, a link given twice': () => {
    const b = bundle((e, i) => {
      if (i === 2000) (e.request as Json).url = 7;
      if (i === n - 1) e.search = { mode: 'match' };
      if (i === SHELL_CHUNK * 3) e.fullUrl = entry(2).fullUrl;
    }, { meta: { lastUpdated: 'yesterday' }, total: 3 }) as Json;
    return { ...b, link: [{ relation: 'next', url: 'a' }, { relation: 'next', url: 'b' }], unknownAfter: true } as unknown as Resource;
  },
  'element ids in two chunks': () => bundle((e, i) => {
    if (i === 1 || i === SHELL_CHUNK + 1) (e.request as Json).id = 'r';
  }),
  'an element id on every entry, one given again in a later chunk beside other problems of its entry': () => bundle((e, i) => {
    e.id = `e${i}`;
    if (i === SHELL_CHUNK * 3 + 2) {
      e.id = 'e7';
      (e.request as Json).method = 'FETCH';
      e.bogus = 1;
    }
    if (i === 9) (e.request as Json).extension = [{ id: 'e8', url: 'http://example.org/x', valueString: 'x' }];
  }),
  'element ids in two chunks, the Bundle with an id (a resource id, no element id)': () => bundle((e, i) => {
    if (i === 1 || i === SHELL_CHUNK + 1) (e.request as Json).id = 'r';
  }, { id: 'r' }),
  "element ids in the Bundle's own elements only": () => bundle((e, i) => {
    if (i === 2) (e.request as Json).method = 'FETCH';
  }, { meta: { id: 'm', lastUpdated: '2020-01-01T00:00:00Z' } }),
  "element ids in the Bundle's own elements and in its entries": () => {
    const b = bundle((e, i) => {
      if (i === SHELL_CHUNK + 5) (e.request as Json).id = 's';
    }, { meta: { id: 'm', lastUpdated: '2020-01-01T00:00:00Z' } }) as Json;
    return { ...b, signature: { id: 's', type: [{ system: 'urn:iso-astm:E1762-95:2013', code: '1.2.840.10065.1.12.1.1' }], when: '2020-01-01T00:00:00Z', who: { reference: 'Patient/p' } } } as unknown as Resource;
  },
  'more than MAX_ISSUES errors': () => bundle((e, i) => {
    if (i % 20 === 0) e.bogus = i;
  }),
};

describe('pacedShellErrors', () => {
  for (const [name, make] of Object.entries(CASES)) {
    for (const level of ['strict', 'structural'] as const) {
      test(`${name} (${level}): the issues of one validation of the whole, in its order`, async () => {
        const b = make();
        const want = shellErrors(b, level);
        let turns = 0;
        const got = await pacedShellErrors(b, level, () => {
          turns++;
          return Promise.resolve();
        });
        expect(got).toEqual(want);
        // Element ids in the Bundle's own elements and its entries are the one case validated whole, from the first chunk
        // whose entries hold any (the second here).
        expect(turns).toBe(name === "element ids in the Bundle's own elements and in its entries" ? 1 : Math.ceil(n / SHELL_CHUNK));
      });
    }
  }

  test('some cases are not valid (the comparison sees issues)', () => {
    expect(shellErrors(CASES['bdl-7 only across chunks']!(), 'strict').map((i) => i.expression)).toEqual([`Bundle.entry[${SHELL_CHUNK + 1}].fullUrl`]);
    expect(shellErrors(CASES["the Bundle's own elements before and after entry"]!(), 'strict').length).toBeGreaterThan(3);
    const ids = shellErrors(CASES['an element id on every entry, one given again in a later chunk beside other problems of its entry']!(), 'strict');
    expect(ids.find((i) => i.expression === `Bundle.entry[${SHELL_CHUNK * 3 + 2}].id`)?.text).toBe("Element ids must be unique within a resource: 'e7' is also the id of Bundle.entry[7]");
    expect(shellErrors(CASES["element ids in the Bundle's own elements and in its entries"]!(), 'strict').map((i) => i.text)).toContain(`Element ids must be unique within a resource: 's' is also the id of Bundle.entry[${SHELL_CHUNK + 5}].request`);
  });
});

describe('pacedShellErrors, generated', () => {
  test('transactions and batches with element ids given again within and across chunks, in their own elements before or after entry, fullUrls repeated, entries that are no objects: the issues of one validation of the whole', async () => {
    let seed = 20261130;
    const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
    const pick = <T>(a: readonly T[]): T => a[Math.floor(rnd() * a.length)]!;
    const ids = ['a', 'b', 'c'];
    for (let c = 0; c < 6; c++) {
      const p = 0.004 + rnd() * 0.006;
      const entries = Array.from({ length: SHELL_CHUNK + 1 + Math.floor(rnd() * SHELL_CHUNK * 2) }, (_, i): unknown => {
        const e = entry(i) as Json & { request: Json };
        if (rnd() < p) e.id = pick(ids);
        if (rnd() < p) e.request.id = pick(ids);
        if (rnd() < p) e.request.extension = [{ id: pick(ids), url: 'http://example.org/x', valueString: 'x' }];
        if (rnd() < p) e.link = [{ id: pick(ids), relation: 'self', url: 'http://example.org/a' }];
        if (rnd() < p / 2) e.fullUrl = entry(1).fullUrl;
        if (rnd() < p / 2) e.request.method = 'FETCH';
        if (rnd() < p / 2) e.response = { id: pick(ids), status: '200', outcome: { resourceType: 'OperationOutcome', issue: [{ id: pick(ids), severity: 'error', code: 'invalid' }] } };
        return rnd() < p / 4 ? pick([null, 3, [e], 'x']) : e;
      });
      const own = (): Json => ({
        ...(rnd() < 0.3 ? { id: 'b' } : {}),
        ...(rnd() < 0.3 ? { meta: { id: pick(ids), lastUpdated: '2020-01-01T00:00:00Z' } } : {}),
        ...(rnd() < 0.3 ? { identifier: { id: pick(ids), value: 'v' } } : {}),
      });
      const b = { resourceType: 'Bundle', type: pick(['transaction', 'batch']), ...own(), entry: entries, ...own() } as unknown as Resource;
      for (const level of ['strict', 'structural'] as const) expect(await pacedShellErrors(b, level, () => undefined)).toEqual(shellErrors(b, level));
    }
  });
});
