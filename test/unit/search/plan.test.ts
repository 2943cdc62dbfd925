/** The search planner: which indexed condition drives a search, and how much counting it costs to choose. */
import { describe, expect, test } from 'bun:test';
import { compileSearch } from '../../../src/fhir/search.ts';
import { DRIVER_MAX_ROWS, DRIVER_TAKE_AT, DRIVER_WIDE_MAX_ROWS, driverCandidates, PLAN_SAMPLE_ROWS, planContext, planSearch, POSTGRES, SQLITE, withoutAbsentKeys, type DriverCandidate, type PlanContext } from '../../../src/store/search-sql.ts';
import { createTypeSizes } from '../../../src/store/type-sizes.ts';
import type { Condition } from '../../../src/store/types.ts';

/** Candidates whose statements are just their names, and a count that answers each one's rows up to the limit asked. */
function counting(rows: Record<string, number>) {
  const asked: [string, number][] = [];
  const candidates: DriverCandidate[] = Object.keys(rows).map((name, i) => ({ driver: name === 'compartment' ? 'compartment' : i, sampled: true, count: (limit) => ({ sql: `${name} ${limit}`, values: [], form: 'plain' as const }) }));
  const count = (sql: string) => {
    const [name, limit] = sql.split(' ') as [string, string];
    asked.push([name, Number(limit)]);
    return Math.min(rows[name]!, Number(limit));
  };
  return { candidates, count, asked };
}

describe('planSearch', () => {
  test('a small condition behind a large one drives, and the large one is read only up to the first limit', async () => {
    const { candidates, count, asked } = counting({ status: 50_000, patient: 12 });
    expect(await planSearch(candidates, count)).toEqual({ driver: 1 });
    expect(asked).toEqual([['status', DRIVER_TAKE_AT + 1], ['patient', DRIVER_TAKE_AT + 1]]);
  });

  test('the first small one is taken without counting the rest', async () => {
    const { candidates, count, asked } = counting({ compartment: 80, code: 30, date: 10 });
    expect(await planSearch(candidates, count)).toEqual({ driver: 'compartment' });
    expect(asked).toEqual([['compartment', DRIVER_TAKE_AT + 1]]);
  });

  test('when none is small, the fewest rows up to the maximum drive; counted again up to it', async () => {
    const { candidates, count, asked } = counting({ a: 1500, b: 900, c: 40_000 });
    expect(await planSearch(candidates, count)).toEqual({ driver: 1 });
    expect(asked.filter(([, limit]) => limit === DRIVER_MAX_ROWS + 1).map(([sql]) => sql)).toEqual(['a', 'b', 'c']);
  });

  test('no candidate within the maximum: no driver (the type is read in sort order)', async () => {
    const { candidates, count } = counting({ a: 5000, b: 2001 });
    expect(await planSearch(candidates, count)).toEqual({});
    expect(await planSearch([], count)).toEqual({});
  });

  test('a lone candidate is counted once, up to the maximum, and drives within it', async () => {
    for (const [rows, plan] of [[150, { driver: 0, rows: 150 }], [1500, { driver: 0, rows: 1500 }], [DRIVER_MAX_ROWS + 5, {}]] as const) {
      const { candidates, count, asked } = counting({ date: rows });
      expect(await planSearch(candidates, count)).toEqual(plan);
      expect(asked).toEqual([['date', DRIVER_MAX_ROWS + 1]]);
    }
  });

  /** A PlanContext on SQLite's costs: `size` resources, a sample that finds `hits` of its rows (statement `sample N`). */
  const context = (need: number, narrowed: boolean, size: number, hits = 0): PlanContext => ({
    need, narrowed, costs: SQLITE.costs, typeSize: () => size,
    sample: (rows) => ({ sql: `sample ${rows}`, values: [] }),
  });
  /** As counting(), with a sample statement answered `hits`, and the candidates named in `sets` left out of it. */
  function withSample(rows: Record<string, number>, hits: number, sets: string[] = []) {
    const c = counting(rows);
    return {
      ...c,
      candidates: c.candidates.map((x, i) => ({ ...x, sampled: !sets.includes(Object.keys(rows)[i]!) })),
      count: (sql: string) => (sql.startsWith('sample ') ? (c.asked.push(['sample', Number(sql.split(' ')[1])]), hits) : c.count(sql)),
    };
  }

  test('a count or a sort on a parameter reads every match: a driver of up to DRIVER_WIDE_MAX_ROWS rows, fewer than the type\'s', async () => {
    const { candidates, count, asked } = counting({ a: 30_000, b: 150_000 });
    expect(await planSearch(candidates, count, context(Infinity, true, 1_000_000))).toEqual({ driver: 0 });
    expect(asked.slice(-2)).toEqual([['a', DRIVER_WIDE_MAX_ROWS + 1], ['b', DRIVER_WIDE_MAX_ROWS + 1]]);
    // Among 10,000 resources, 30,000 index rows (several values each) cost more than reading them all.
    expect(await planSearch(candidates, count, context(Infinity, true, 10_000))).toEqual({});
    expect(await planSearch(counting({ a: 150_000, b: 200_000 }).candidates, counting({ a: 150_000, b: 200_000 }).count, context(Infinity, true, 1_000_000))).toEqual({});
  });

  test('a lone condition of more than DRIVER_MAX_ROWS rows, for a page: read in order, no further count', async () => {
    const { candidates, count, asked } = counting({ code: 80_000 });
    const sized = { ...context(51, false, 0), typeSize: () => { throw new Error('not needed'); } };
    expect(await planSearch(candidates, count, sized)).toEqual({});
    expect(asked).toEqual([['code', DRIVER_MAX_ROWS + 1]]);
  });

  test('a chain left out of the sample is counted, and drives when the sample says its rows rarely match the rest', async () => {
    // 686,776 Observations; a chain of 11,685 reference rows and a code that 4 in 100 have.
    const rare = withSample({ chain: 11_685, code: 30_753 }, 4, ['chain']);
    expect(await planSearch(rare.candidates, rare.count, context(51, true, 686_776))).toEqual({ driver: 0 });
    expect(rare.asked.slice(4)).toEqual([['chain', DRIVER_WIDE_MAX_ROWS + 1], ['sample', PLAN_SAMPLE_ROWS]]);
    // A code that 12 in 100 have: reading in order finds the page after 25,000 or so, each rejected
    // by the chain's set on its key, which costs less than probing the chain's 11,685 rows.
    const common = withSample({ chain: 11_685, code: 80_295 }, 12, ['chain']);
    expect(await planSearch(common.candidates, common.count, context(51, true, 686_776))).toEqual({});
  });

  test('on PostgreSQL a chain driving wide intersects the lone sampled condition\'s rows where they cost less as a set than as probes', async () => {
    // A PlanContext on PostgreSQL's costs, whose sample tests `code` (candidate 1) alone.
    const pg = (need: number, hits: number): PlanContext => ({ ...context(need, true, 686_776, hits), costs: POSTGRES.costs, lone: 1 });
    // The sample finds 4 in 100 (about 27,000 rows): hashed with the chain's 11,685 rather than 11,685 probes.
    const rare = withSample({ chain: 11_685, code: 30_753 }, 4, ['chain']);
    expect(await planSearch(rare.candidates, rare.count, pg(51, 4))).toEqual({ driver: 0, intersect: 1 });
    // 9 in 100 (about 62,000): still; 14 in 100 (about 96,000) cost more as a set.
    const nine = withSample({ chain: 11_685, code: 61_000 }, 9, ['chain']);
    expect(await planSearch(nine.candidates, nine.count, pg(51, 9))).toEqual({ driver: 0, intersect: 1 });
    const fourteen = withSample({ chain: 11_685, code: 96_000 }, 14, ['chain']);
    expect(await planSearch(fourteen.candidates, fourteen.count, pg(51, 14))).toEqual({ driver: 0 });
    // A count reads every match, and counts both: their rows decide, not the sample.
    const counted = withSample({ chain: 11_685, code: 30_753 }, 0, ['chain']);
    expect(await planSearch(counted.candidates, counted.count, pg(Infinity, 0))).toEqual({ driver: 0, intersect: 1 });
    expect(counted.asked.some(([name]) => name === 'sample')).toBe(false);
    const many = withSample({ chain: 3_000, code: 60_000 }, 0, ['chain']);
    expect(await planSearch(many.candidates, many.count, pg(Infinity, 0))).toEqual({ driver: 0 });
    // Without a lone condition, or on SQLite (no intersectRow), the driver probes as before.
    const { lone: _, ...without } = pg(51, 4);
    expect(await planSearch(rare.candidates, rare.count, without)).toEqual({ driver: 0 });
    expect(await planSearch(rare.candidates, rare.count, { ...pg(51, 4), costs: SQLITE.costs })).toEqual({ driver: 0 });
  });

  test('on PostgreSQL a date range\'s two wide conditions: one drives, the other\'s rows are intersected as a set, not probed', async () => {
    // 85,824 Observations: `date=lt2020-03-08` has 41,434 rows, `date=ge2020-03-01` 44,583, 193 resources both.
    const pg = (need: number): PlanContext => ({ ...context(need, true, 85_824), costs: POSTGRES.costs, pair: [0, 1] });
    // A count reads every match (a page, after the first rows read in order found none, is planned the
    // same way: test/http/search-planner.test.ts).
    const range = withSample({ lt: 41_434, ge: 44_583 }, 0);
    expect(await planSearch(range.candidates, range.count, pg(Infinity))).toEqual({ driver: 0, intersect: 1 });
    const reversed = withSample({ ge: 44_583, lt: 41_434 }, 0);
    expect(await planSearch(reversed.candidates, reversed.count, pg(Infinity))).toEqual({ driver: 1, intersect: 0 });
    // Rows of the other that cost more hashed than the driver's probes: probed, as before; SQLite (no
    // intersectRow) and a context without the pair probe too.
    const lopsided = withSample({ lt: 3_000, ge: 60_000 }, 0);
    expect(await planSearch(lopsided.candidates, lopsided.count, pg(Infinity))).toEqual({ driver: 0 });
    expect(await planSearch(range.candidates, range.count, { ...pg(Infinity), costs: SQLITE.costs })).toEqual({ driver: 0 });
    const { pair: _, ...without } = pg(Infinity);
    expect(await planSearch(range.candidates, range.count, without)).toEqual({ driver: 0 });
  });

  test('the pair: the two conditions the sample tests, without a compartment, each able to be read as rows', () => {
    const pair = (query: string, compartment?: string) => {
      const compiled = compileSearch('Observation', new URLSearchParams(query), true);
      const q = { ...compiled.query, where: compiled.pending as Condition[], ...(compartment && { compartment }) };
      return planContext(POSTGRES, 't1', q, false, () => 1).pair;
    };
    expect(pair('date=ge2020-03-01&date=lt2020-03-08')).toEqual([0, 1]);
    expect(pair('code=8302-2&date=ge2020')).toEqual([0, 1]);
    expect(pair('subject:Patient.family=smith&code=8302-2&date=ge2020')).toEqual([1, 2]);
    expect(pair('date=ge2020-03-01&date=lt2020-03-08', 'p1')).toBeUndefined();
    expect(pair('date=ge2020&code=8302-2&category=vital-signs')).toBeUndefined();
    expect(pair('code:not=8302-2&date=ge2020')).toBeUndefined();
    expect(pair('code=8302-2')).toBeUndefined();
  });

  test('the lone condition: the one the sample tests, alone, without a compartment, and able to be read as rows', () => {
    const lone = (query: string, compartment?: string) => {
      const compiled = compileSearch('Observation', new URLSearchParams(query), true);
      const q = { ...compiled.query, where: compiled.pending as Condition[], ...(compartment && { compartment }) };
      return planContext(POSTGRES, 't1', q, false, () => 1).lone;
    };
    expect(lone('subject:Patient.family=smith&code=8302-2')).toBe(1);
    expect(lone('code=8302-2&subject:Patient.family=smith')).toBe(0);
    expect(lone('subject:Patient.family=smith&code=8302-2&category=vital-signs')).toBeUndefined();
    expect(lone('subject:Patient.family=smith&code=8302-2', 'p1')).toBeUndefined();
    expect(lone('subject:Patient.family=smith&code:not=8302-2')).toBeUndefined();
    expect(lone('_lastUpdated=ge2020&code=8302-2')).toBe(1);
  });

  test('each candidate statement has the limit planSearch asks for written in, not bound', () => {
    const [c] = driverCandidates(SQLITE, 't1', { type: 'Observation', where: [{ kind: 'token', param: 'code', values: [{ value: 'x' }] }], sort: [] } as never);
    // Four values of its own (tenant, type, parameter, code), and no placeholder for the limit.
    const { sql, values } = c!.count(DRIVER_TAKE_AT + 1);
    expect(values).toEqual(['t1', 'Observation', 'code', 'x']);
    expect(sql).toMatch(new RegExp(`LIMIT ${DRIVER_TAKE_AT + 1}\\) x$`));
    expect(sql).not.toContain('?5');
    expect(c!.count(DRIVER_MAX_ROWS + 1).sql).toMatch(new RegExp(`LIMIT ${DRIVER_MAX_ROWS + 1}\\) x$`));
  });

  test('references to resources are counted first, then the other conditions in the query\'s order', () => {
    const where = [
      { kind: 'token', param: 'clinical-status', values: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-clinical', value: 'active' }] },
      { kind: 'date', param: 'onset-date', tests: [{ op: 'le', low: 0, high: 1 }] },
      { kind: 'token', param: 'patient', values: [{ system: 'Patient', value: 'p1' }], reference: true },
    ];
    const candidates = driverCandidates(SQLITE, 't1', { type: 'Condition', where, sort: [] } as never);
    expect(candidates.map((c) => c.driver)).toEqual([2, 0, 1]);
    const withCompartment = driverCandidates(SQLITE, 't1', { type: 'Condition', where, compartment: 'p1', sort: [] } as never);
    expect(withCompartment.map((c) => c.driver)).toEqual(['compartment', 2, 0, 1]);
  });

  test('the search compiler marks references to resources, not :identifier or tokens', () => {
    const compiled = (query: string) => compileSearch('Condition', new URLSearchParams(query), true).pending;
    expect(compiled('patient=p1')).toEqual([{ kind: 'token', param: 'subject', values: [{ system: 'Patient', value: 'p1' }], reference: true }]);
    expect(compiled('subject=Patient/p1')[0]).toMatchObject({ reference: true });
    expect(compiled('clinical-status=active')[0]).not.toHaveProperty('reference');
    expect(compiled('patient:identifier=urn:mrn|1')[0]).not.toHaveProperty('reference');
  });
});

describe('TypeSizes', () => {
  test('measures a tenant\'s type once per period, shares a measurement in flight, and forgets a failed one', async () => {
    let now = 0;
    const asked: string[] = [];
    let fail = false;
    const sizes = createTypeSizes(async (tenant, type) => {
      asked.push(`${tenant}/${type}`);
      if (fail) throw new Error('down');
      return asked.length * 10;
    }, 1000, () => now);
    expect(await Promise.all([sizes.get('t1', 'Observation'), sizes.get('t1', 'Observation')])).toEqual([10, 10]);
    expect(await sizes.get('t2', 'Observation')).toBe(20);
    now = 999;
    expect(await sizes.get('t1', 'Observation')).toBe(10);
    now = 1000;
    fail = true;
    await expect(sizes.get('t1', 'Observation')).rejects.toThrow('down');
    fail = false;
    expect(await sizes.get('t1', 'Observation')).toBe(40);
    expect(asked).toEqual(['t1/Observation', 't2/Observation', 't1/Observation', 't1/Observation']);
  });
});

describe('a parameter searched as others ANDed', () => {
  test('becomes those conditions, each a driver candidate as on its own', () => {
    const compiled = compileSearch('Observation', new URLSearchParams('code-value-quantity=http://loinc.org|8302-2$gt190'), true);
    expect(compiled.pending.map((c) => [c.kind, 'param' in c ? c.param : undefined])).toEqual([['token', 'code'], ['number', 'value-quantity']]);
    const q = { ...compiled.query, where: compiled.pending as Condition[] };
    // Both can drive: the code, and the quantity's `gt` by the stored high end.
    expect(driverCandidates(SQLITE, 't1', q).map((c) => c.driver)).toEqual([0, 1]);
    // Two alternatives are an OR of the two pairs, which cannot drive (neither pair's rows alone are
    // its answer), and each parameter's values ORed, which every match has, and which can.
    const two = compileSearch('Observation', new URLSearchParams('code-value-quantity=http://loinc.org|8302-2$gt190,http://loinc.org|29463-7$gt150'), true);
    expect(two.pending.map((c) => c.kind)).toEqual(['token', 'number', 'or']);
    expect(two.pending[0]).toEqual({ kind: 'token', param: 'code', values: [{ system: 'http://loinc.org', value: '8302-2' }, { system: 'http://loinc.org', value: '29463-7' }] });
    expect((two.pending[1] as Condition & { kind: 'number' }).tests.map((t) => [t.op, t.value])).toEqual([['gt', 190], ['gt', 150]]);
    expect(driverCandidates(SQLITE, 't1', { ...two.query, where: two.pending as Condition[] }).map((c) => c.driver)).toEqual([0, 1]);
    const combo = compileSearch('Observation', new URLSearchParams('combo-code=8302-2'), true);
    expect(combo.pending.map((c) => c.kind)).toEqual(['or']);
    const [candidate] = driverCandidates(SQLITE, 't1', { ...combo.query, where: combo.pending as Condition[] });
    expect(candidate!.driver).toBe(0);
    expect(candidate!.count(10).sql).toContain('UNION ALL');
  });
});

describe(':missing', () => {
  test('=false can drive (the rows of the parameter\'s keys); =true cannot', () => {
    const candidates = (query: string) => {
      const compiled = compileSearch('Patient', new URLSearchParams(query), true);
      return driverCandidates(SQLITE, 't1', { ...compiled.query, where: compiled.pending as Condition[] });
    };
    const [has] = candidates('death-date:missing=false');
    expect(has!.driver).toBe(0);
    expect(has!.count(10).sql).toContain('FROM search_range');
    expect(candidates('death-date:missing=true')).toEqual([]);
  });
});

describe('an alternative whose key does not exist', () => {
  test('is dropped from its OR, so that the other alternatives drive (a Provenance search by a patient\'s token)', async () => {
    const patient: Condition = { kind: 'token', param: 'target', values: [{ system: 'Patient', value: 'p1' }], reference: true };
    const chain = (targetType: string): Condition => ({ kind: 'chain', param: 'target', targetType, where: [{ kind: 'compartment', patient: 'p1' }] });
    const q = { type: 'Provenance', where: [{ kind: 'or', any: [patient, chain('Observation'), chain('Condition')] } as Condition], sort: [], count: 10 };
    const pruned = await withoutAbsentKeys(q, (_type, _param, system) => system === 'Observation');
    expect(pruned.where).toEqual([{ kind: 'or', any: [patient, chain('Observation')] }]);
    const [driver] = driverCandidates(SQLITE, 't1', pruned);
    expect(driver!.driver).toBe(0);
    // Every alternative absent: the OR selects nothing.
    expect((await withoutAbsentKeys({ ...q, where: [{ kind: 'or', any: [chain('Condition')] }] }, () => false)).where).toEqual([{ kind: 'or', any: [] }]);
  });
});

describe('numbers and quantities', () => {
  test('a test can drive by the stored low end where it bounds it, else by the high end; ne cannot', () => {
    const candidates = (query: string) => {
      const compiled = compileSearch('Observation', new URLSearchParams(query), true);
      return driverCandidates(SQLITE, 't1', { ...compiled.query, where: compiled.pending as Condition[] });
    };
    for (const q of ['value-quantity=182.1', 'value-quantity=182.1||cm', 'value-quantity=lt5', 'value-quantity=le5,eb2', 'value-quantity=ap100', 'value-quantity=sa5||cm']) {
      const [c] = candidates(q);
      expect(c!.driver).toBe(0);
      expect(c!.count(10).sql).toMatch(/s\d+\.low [<>]=? \?/);
    }
    for (const q of ['value-quantity=gt5', 'value-quantity=ge5']) {
      const [c] = candidates(q);
      expect(c!.driver).toBe(0);
      // The (k, high) index reads the bound; the low end is unindexed.
      expect(c!.count(10).sql).toMatch(/s\d+\.high >=? \?/);
      expect(c!.count(10).sql).not.toMatch(/[^+]s\d+\.low/);
    }
    // One bound each: the OR's rows are those of two ranges, one of each index.
    const [both] = candidates('value-quantity=lt5,gt9');
    expect(both!.count(10).sql).toMatch(/s\d+\.low < \?.* OR .*s\d+\.high > \?/);
    for (const q of ['value-quantity=ne5', 'value-quantity=lt5,ne9']) expect(candidates(q)).toEqual([]);
    // Bounds on the same end and side are written once, the loosest (one range of the index).
    const [same] = candidates('value-quantity=gt190,ge150');
    const { sql, values } = same!.count(10);
    expect(sql).toMatch(/\(s\d+\.high >= \?1 AND \(s\d+\.high > \?2 OR s\d+\.high >= \?3\)\)/);
    expect(values.slice(0, 3)).toEqual([150, 190, 150]);
  });
});
