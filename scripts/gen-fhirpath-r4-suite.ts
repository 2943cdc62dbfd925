/**
 * Converts HL7's FHIRPath test suite for R4 (github.com/FHIR/fhir-test-cases, `r4/fhirpath/tests-fhir-r4.xml`,
 * Apache-2.0; its example resources are FHIR specification content, CC0) into
 * `test/fixtures/fhirpath/r4-suite.json` for test/unit/validation/fhirpath-r4-suite.test.ts: each case's
 * expression, input file, flags (`invalid`, `mode`, `predicate`, `version`) and expected outputs, with the
 * input resources as FHIR JSON (the XML ones read by Cinder's own FHIR XML parser).
 *
 *   bun run scripts/gen-fhirpath-r4-suite.ts <path to the fhir-test-cases r4 folder>
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseFhirXml } from '../src/fhir/xml/from-xml.ts';
import { parseXml, type XmlElement, type XmlNode } from '../src/fhir/xml/xml-parse.ts';
import { typeModel } from '../src/fhir/validation/model.ts';

const dir = process.argv[2];
if (dir === undefined) throw new Error('usage: bun run scripts/gen-fhirpath-r4-suite.ts <fhir-test-cases/r4>');

const elements = (el: XmlElement, local: string) => el.children.filter((c): c is XmlElement => c.kind === 'element' && c.local === local);
const attr = (el: XmlElement, name: string) => el.attributes.find((a) => a.local === name)?.value;
const text = (el: XmlElement) => el.children.map((c: XmlNode) => (c.kind === 'text' ? c.text : '')).join('');

/**
 * The document with its resource's elements in R4's order: the suite's observation-example.xml has its `extension`
 * after `status`, which Cinder's parser (rightly) refuses; FHIRPath reads the same content either way.
 */
function inOrder(source: string): string {
  const resource = parseXml(source, 200);
  const order = [...(typeModel(resource.local)?.slots.keys() ?? [])];
  const kids = resource.children.filter((c): c is XmlElement => c.kind === 'element');
  if (kids.length === 0) return source;
  const rank = (el: XmlElement) => order.indexOf(el.local);
  const sorted = [...kids].sort((a, b) => rank(a) - rank(b));
  const first = kids[0]!.start;
  const last = kids[kids.length - 1]!.end;
  return source.slice(0, first) + sorted.map((el) => source.slice(el.start, el.end)).join('\n') + source.slice(last);
}

const root = parseXml(readFileSync(join(dir, 'fhirpath/tests-fhir-r4.xml'), 'utf8'), 20);
const inputs: Record<string, unknown> = {};
const cases: unknown[] = [];
for (const group of elements(root, 'group')) {
  for (const t of elements(group, 'test')) {
    const input = attr(t, 'inputfile');
    if (input !== undefined && !(input in inputs)) {
      const source = readFileSync(join(dir, input), 'utf8');
      inputs[input] = input.endsWith('.json') ? JSON.parse(source) : parseFhirXml(inOrder(source), { plain: true });
    }
    const expression = elements(t, 'expression')[0]!;
    const flags: Record<string, string> = {};
    for (const name of ['mode', 'predicate', 'version', 'ordered', 'checkOrderedFunctions']) {
      const v = attr(t, name);
      if (v !== undefined) flags[name] = v;
    }
    const invalid = attr(expression, 'invalid');
    const mode = attr(expression, 'mode');
    if (mode !== undefined) flags.mode = mode;
    cases.push({
      group: attr(group, 'name'),
      name: attr(t, 'name'),
      ...(input !== undefined && { input }),
      expression: text(expression).trim(),
      ...(invalid !== undefined && { invalid }),
      ...flags,
      outputs: elements(t, 'output').map((o) => ({ type: attr(o, 'type') ?? '', value: text(o) })),
    });
  }
}
const out = {
  source: 'HL7 FHIRPath test suite for R4 (github.com/FHIR/fhir-test-cases r4/fhirpath/tests-fhir-r4.xml, Apache-2.0; example resources CC0), converted by scripts/gen-fhirpath-r4-suite.ts',
  inputs,
  cases,
};
// One case a line: the file diffs by case when HL7's suite changes.
const json = `{\n "source": ${JSON.stringify(out.source)},\n "inputs": ${JSON.stringify(out.inputs)},\n "cases": [\n${cases.map((c) => `  ${JSON.stringify(c)}`).join(',\n')}\n ]\n}\n`;
writeFileSync(new URL('../test/fixtures/fhirpath/r4-suite.json', import.meta.url), json);
console.log(`${cases.length} cases, ${Object.keys(inputs).length} inputs`);
