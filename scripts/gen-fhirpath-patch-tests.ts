/**
 * Converts HL7's FHIRPath Patch test cases (github.com/FHIR/fhir-test-cases, `r5/patch/fhir-patch-tests.xml`)
 * into `test/fixtures/patch/fhirpath-patch-tests.json` for the table-driven unit test of the patch
 * engine: each case's input resource, Parameters and expected output (or error) as FHIR JSON.
 *
 *   bun run scripts/gen-fhirpath-patch-tests.ts <path to fhir-patch-tests.xml>
 *
 * FHIR XML becomes JSON by the R4 validation model (which elements repeat, which primitives are
 * numbers or booleans); an `xhtml` div keeps its XML text (quotes unescaped, line ends LF). The file's one primitive written with an
 * attribute other than `value` (`<reference reference="Device/1"/>`) takes that attribute's text.
 */
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { typeModel } from '../src/fhir/validation/model.ts';

interface XmlElement { name: string; attrs: Record<string, string>; children: XmlElement[]; raw: string }

function decode(text: string): string {
  return text.replace(/&(apos|quot|lt|gt|amp|#x([0-9a-fA-F]+)|#(\d+));/g, (_, e: string, hex?: string, dec?: string) =>
    hex ? String.fromCodePoint(parseInt(hex, 16)) : dec ? String.fromCodePoint(Number(dec)) : ({ apos: "'", quot: '"', lt: '<', gt: '>', amp: '&' } as Record<string, string>)[e]!);
}

/** A small XML reader: elements, attributes, comments; text outside xhtml is whitespace in these files. */
function parseXml(text: string): XmlElement {
  const tag = /<!--[\s\S]*?-->|<\?[\s\S]*?\?>|<(\/?)([A-Za-z_][\w.:-]*)((?:\s+[\w:.-]+\s*=\s*(?:"[^"]*"|'[^']*'))*)\s*(\/?)>/g;
  const stack: { el: XmlElement; start: number }[] = [];
  let root: XmlElement | undefined;
  for (let m = tag.exec(text); m; m = tag.exec(text)) {
    if (m[2] === undefined) continue;
    const [, close, name, attrText, selfClose] = m;
    if (close) {
      const { el, start } = stack.pop()!;
      if (el.name !== name) throw new Error(`mismatched </${name}> at ${m.index}`);
      el.raw = text.slice(start, m.index + m[0].length);
      continue;
    }
    const attrs: Record<string, string> = {};
    for (const a of attrText!.matchAll(/([\w:.-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')/g)) attrs[a[1]!] = decode(a[2] ?? a[3] ?? '');
    const el: XmlElement = { name: name!, attrs, children: [], raw: m[0] };
    if (stack.length > 0) stack[stack.length - 1]!.el.children.push(el);
    else root = el;
    if (!selfClose) stack.push({ el, start: m.index });
  }
  return root!;
}

const NUMBERS = new Set(['integer', 'positiveInt', 'unsignedInt', 'decimal']);

function primitive(el: XmlElement, type: string): unknown {
  const text = el.attrs.value ?? Object.values(el.attrs).find((_, i) => Object.keys(el.attrs)[i] !== 'id');
  if (type === 'boolean') return text === 'true';
  if (NUMBERS.has(type)) return Number(text);
  return text;
}

/** The JSON of element `el` of FHIR type `type`. */
function toJson(el: XmlElement, type: string): unknown {
  // `&quot;` and `"` are the same text content; serialised as the Parameters' attribute value was decoded.
  if (type === 'xhtml') return el.raw.replace(/&quot;/g, '"').replace(/&apos;/g, "'");
  if (type === 'Resource') return resource(el.children[0]!);
  const model = typeModel(type);
  if (model === null || (model.slots.size === 0 && 'value' in el.attrs)) return primitive(el, type);
  if (el.children.length === 0 && 'value' in el.attrs && !model.slots.has('url')) return primitive(el, type);
  const out: Record<string, unknown> = {};
  if (el.attrs.url !== undefined) out.url = el.attrs.url;
  for (const child of el.children) {
    const slot = model.slots.get(child.name);
    if (slot === undefined) throw new Error(`${type} has no element ${child.name}`);
    const value = slot.primitive && slot.type !== 'xhtml' ? primitive(child, slot.type) : toJson(child, slot.type);
    if (slot.element.max > 1) ((out[child.name] ??= []) as unknown[]).push(value);
    else out[child.name] = value;
  }
  return out;
}

function resource(el: XmlElement): Record<string, unknown> {
  return { resourceType: el.name, ...(toJson(el, el.name) as Record<string, unknown>) };
}

const [file, out = 'test/fixtures/patch/fhirpath-patch-tests.json'] = process.argv.slice(2);
if (!file) throw new Error('usage: bun run scripts/gen-fhirpath-patch-tests.ts <fhir-patch-tests.xml> [out.json]');
// XML normalises line ends to LF (XML 1.0 section 2.11).
const cases = parseXml(readFileSync(file, 'utf8').replace(/\r\n?/g, '\n')).children.filter((c) => c.name === 'case').map((c) => {
  const part = (name: string) => c.children.find((x) => x.name === name);
  const output = part('output');
  const error = part('error');
  return {
    name: c.attrs.name,
    input: resource(part('input')!.children[0]!),
    patch: resource(part('diff')!.children[0]!),
    ...(output ? { output: resource(output.children[0]!) } : {}),
    ...(error ? { error: error.attrs.msg } : {}),
  };
});
mkdirSync(out.slice(0, out.lastIndexOf('/')), { recursive: true });
writeFileSync(out, JSON.stringify(cases, null, 1) + '\n');
console.log(`${cases.length} cases -> ${out}`);
