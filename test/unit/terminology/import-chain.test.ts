/**
 * The record of the imported ValueSets a code was drawn through (membership.ts DrawnThrough), down a chain of value
 * sets each importing the next: each level puts one node in front of the record the level below made instead of
 * copying it into a new list, so a code drawn down n imports costs n nodes, not n²/2 copies (a chain of 2,000 held an
 * `$expand` 46-48 s when each level copied; bench/terminology-chain.ts times it). Counted here, not timed: the
 * record of a code drawn down the chain is one node per import, each holding the level below's as `inner`.
 */
import { expect, test } from 'bun:test';
import { type ExpansionEntry, enumerateValueSet } from '../../../src/terminology/compile/enumerate.ts';
import { type DrawnThrough, drawnValueSets } from '../../../src/terminology/compile/membership.ts';
import { TerminologyService } from '../../../src/terminology/service.ts';
import { MemoryTerminologySource } from '../../helpers/memory-terminology.ts';

const CS = 'http://cinder.test/CodeSystem/chain-codes';
const DEPTH = 40;
const CODES = 3;
const link = (i: number) => `http://cinder.test/ValueSet/chain-${i}`;

async function chain() {
  const source = new MemoryTerminologySource();
  source.put({ resourceType: 'CodeSystem', id: 'chain-codes', url: CS, status: 'active', content: 'complete', concept: Array.from({ length: CODES }, (_, i) => ({ code: `c${i}` })) });
  for (let i = 0; i < DEPTH; i++) {
    source.put({ resourceType: 'ValueSet', id: `chain-${i}`, url: link(i), status: 'active', compose: { include: [i === DEPTH - 1 ? { system: CS } : { valueSet: [link(i + 1)] }] } });
  }
  const context = await new TerminologyService({ core: new MemoryTerminologySource(), sourceFor: () => source }).context('t');
  const entries = async (i: number) => {
    const out: ExpansionEntry[] = [];
    for await (const e of enumerateValueSet((await context.valueSet(link(i)))!, context)) out.push(e);
    return out;
  };
  return { context, entries };
}

/** The nodes of a record, along the imports each was drawn through inside the one before. */
function levels(via: DrawnThrough | undefined): DrawnThrough[] {
  const out: DrawnThrough[] = [];
  for (let node = via; node !== undefined; node = node.inner) out.push(node);
  return out;
}

test('a code drawn down a chain of imports carries one node per import, the chain in order', async () => {
  const { context, entries } = await chain();
  const top = await entries(0);
  expect(top.map((e) => e.code)).toEqual(Array.from({ length: CODES }, (_, i) => `c${i}`));
  const urls = Array.from({ length: DEPTH - 1 }, (_, i) => link(i + 1));
  for (const e of top) {
    const nodes = levels(e.via);
    expect(nodes.map((n) => n.vs.resource.url)).toEqual(urls);
    // No node has a sibling: each level imports one value set.
    expect(nodes.every((n) => n.next === undefined)).toBe(true);
    expect(drawnValueSets(e.via).size).toBe(DEPTH - 1);
  }
  // A code drawn by the value set that includes the code system itself was drawn through nothing.
  expect((await entries(DEPTH - 1)).every((e) => e.via === undefined)).toBe(true);
  expect(await context.valueSet(link(0))).not.toBeNull();
});
