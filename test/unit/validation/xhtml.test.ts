/**
 * The narrative checker (src/fhir/validation/xhtml.ts) beyond what test/http/validation-narrative.test.ts
 * shows: its lists are txt-1's, and no input makes it throw or recurse.
 */
import { expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import { checkNarrative, NARRATIVE_ATTRIBUTES, NARRATIVE_ELEMENTS } from '../../../src/fhir/validation/xhtml.ts';

const NS = 'xmlns="http://www.w3.org/1999/xhtml"';

test("the element and attribute lists are those of txt-1's XPath in the official R4 StructureDefinition", () => {
  const sd = JSON.parse(readFileSync(new URL('../../../node_modules/hl7.fhir.r4.examples/StructureDefinition-Narrative.json', import.meta.url), 'utf8'));
  const div = sd.snapshot.element.find((e: { path: string }) => e.path === 'Narrative.div');
  const xpath: string = div.constraint.find((c: { key: string }) => c.key === 'txt-1').xpath;
  const lists = [...xpath.matchAll(/=\(([^)]*)\)/g)].map((m) => [...m[1]!.matchAll(/'([^']+)'/g)].map((q) => q[1]).sort());
  expect(lists).toEqual([[...NARRATIVE_ELEMENTS].sort(), [...NARRATIVE_ATTRIBUTES].sort()]);
});

test('deep nesting is scanned without recursion', () => {
  const depth = 200_000;
  expect(checkNarrative(`<div ${NS}>${'<b>'.repeat(depth)}x${'</b>'.repeat(depth)}</div>`)).toEqual([]);
  expect(checkNarrative(`<div ${NS}>${'<b>'.repeat(depth)}x</div>`)[0]!.rule).toBe('xml');
});

test('no input throws: every prefix and random mutations of a rich narrative give problems or none', () => {
  const rich = `<div ${NS} lang="en"><!-- c --><p class='a'>x &amp; &#160; <![CDATA[<y>]]></p><h:b xmlns:h="http://www.w3.org/1999/xhtml">b</h:b><img src="a.png"/></div>`;
  expect(checkNarrative(rich)).toEqual([]);
  for (let i = 0; i < rich.length; i++) expect(Array.isArray(checkNarrative(rich.slice(0, i)))).toBe(true);
  let seed = 7;
  const random = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
  const alphabet = `<>/="'&;#x!-[]?: abpdiv`;
  for (let i = 0; i < 20_000; i++) {
    const chars = [...rich];
    for (let k = 0; k < 3; k++) chars.splice(random(chars.length), random(2), alphabet[random(alphabet.length)]!);
    expect(Array.isArray(checkNarrative(chars.join('')))).toBe(true);
  }
});
