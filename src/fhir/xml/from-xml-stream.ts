import { FhirError } from '../../errors.ts';
import { holdsLiterals, literalOf, recordLiteral, stringifyExact } from '../exact-json.ts';
import { MAX_JSON_DEPTH } from '../../terminology/model/depth.ts';
import { complex, jsonValue, readResource, readXml, type XmlSource } from './from-xml.ts';
import { FHIR_NS } from './xml-model.ts';
import { createXmlReader, type XmlElement } from './xml-parse.ts';

type Obj = Record<string, unknown>;

/** One `Bundle.entry` of a FHIR XML Bundle read as a stream: its index, and its JSON text or why it is not FHIR XML. */
export interface StreamedEntry {
  index: number;
  /** The entry as the JSON form Cinder stores (JSON text; numbers as written). */
  json?: string;
  /** The entry as that JSON value, instead of its text, for a stream asked for values (`values`). */
  value?: Obj;
  /** Its 400 (`expression` names the element: `Bundle.entry[3].resource.nickname`). */
  error?: FhirError;
}

/** A FHIR XML document read as its text arrives: a Bundle's entries are handed over one by one, as each completes. */
export interface FhirXmlStream {
  /** Reads on; answers the entries this chunk completed. Throws the 400 of malformed XML, or of the Bundle's own elements before its first entry. */
  push(chunk: string): StreamedEntry[];
  /** Ends the document; answers the entries completed last. */
  end(): StreamedEntry[];
  /**
   * The Bundle without its entries (its JSON value), once the first entry is read: its `type` tells what to
   * do with the entries. Undefined before, and for a document that is not a Bundle.
   */
  readonly bundle: Obj | undefined;
  /**
   * After `end`: the document's JSON value (as parseFhirXml answers it), its `entry` those given (the JSON
   * texts of StreamedEntry, in order; none: no `entry`). Throws the 400 of what is not FHIR XML in it.
   */
  document(entries: readonly string[]): unknown;
  /** document() for a stream asked for values: its `entry` the values given, none parsed again. */
  documentOf(entries: readonly Obj[]): unknown;
  /**
   * After `end`: throws the 400 that reading the whole text meets before the content of entry `index`, if
   * any: of the Bundle's own elements up to that entry's place (an unknown one, one out of order, the entry
   * itself after `signature`), as parseFhirXml reads them in document order.
   */
  requireHeadOf(index: number): void;
}

/**
 * Options of streamFhirXml: where the text comes from, and whether entries are handed over as values rather
 * than JSON text. A stream asked for values is read to its end before any error is told (parseFhirXmlPaced):
 * the Bundle's own elements before its first entry are checked then (requireHeadOf), not as the entry
 * completes, so that a body malformed further on is refused as malformed, as parseFhirXml refuses it.
 */
export interface XmlStreamOptions extends XmlSource {
  values?: boolean;
}

/**
 * Reads FHIR XML as parseFhirXml does, from chunks of text: the entries of a Bundle leave the XML tree as
 * each completes (as JSON text, or as its error), so that reading costs the largest entry, not the
 * document (R4 xml.html; `cinder import` of a large Bundle). A document of another type is kept whole.
 */
export function streamFhirXml(opts: XmlStreamOptions = {}): FhirXmlStream {
  const what = opts.what ?? 'The request body';
  let found: StreamedEntry[] = [];
  let count = 0;
  let root: XmlElement | undefined;
  // Whether the root is a Bundle, whose entries are handed over: another resource's own `entry` (List.entry) is its content, read whole.
  let streamed = false;
  let bundle: Obj | undefined;
  const take = (child: XmlElement): boolean => {
    if (child.ns !== FHIR_NS || child.local !== 'entry') return false;
    const index = count++;
    // The Bundle's elements before its first entry (its id, meta, type): checked, so that nothing is read from a Bundle that is not one.
    if (index === 0 && !opts.values) bundle = jsonValue(stringifyExact(readResource({ ...root!, children: root!.children.slice(0, -1) }, reader.slice, '')), what) as Obj;
    try {
      const entry = complex(child, 'Bundle.entry', reader.slice, `Bundle.entry[${index}]`);
      found.push(opts.values ? { index, value: entry } : { index, json: stringifyExact(entry) });
    } catch (err) {
      if (!(err instanceof FhirError)) throw err;
      found.push({ index, error: err });
    }
    return true;
  };
  const reader = createXmlReader({
    maxDepth: MAX_JSON_DEPTH,
    dropSpace: true,
    stream: (el) => ((streamed = (root = el).ns === FHIR_NS && el.local === 'Bundle') ? take : undefined),
  });
  const handOver = (): StreamedEntry[] => {
    const out = found;
    found = [];
    return out;
  };
  let ended: XmlElement | undefined;
  return {
    push(chunk) {
      readXml(() => reader.push(chunk), opts);
      return handOver();
    },
    end() {
      ended = readXml(() => reader.end(), opts);
      return handOver();
    },
    get bundle() {
      return bundle;
    },
    document(entries) {
      if (ended === undefined) throw new Error('document() before end()');
      const value = readResource(ended, reader.slice, '');
      // Not a Bundle: read whole, its own `entry` (List.entry) with the rest.
      if (!streamed) return jsonValue(stringifyExact(value), what);
      // The entries' places hold empty elements: their JSON texts go there instead, keys in the order read.
      const members: string[] = [];
      for (const [key, v] of Object.entries(value)) {
        if (key !== 'entry') members.push(`${JSON.stringify(key)}:${literalOf(value, key) ?? stringifyExact(v)}`);
        else if (entries.length > 0) members.push(`"entry":[${entries.join(',')}]`);
      }
      return jsonValue(`{${members.join(',')}}`, what);
    },
    documentOf(entries) {
      if (ended === undefined) throw new Error('documentOf() before end()');
      const value = readResource(ended, reader.slice, '');
      // The entries' places hold empty elements: the values go there instead, the key where it was read. Not a
      // Bundle: read whole, its own `entry` (List.entry) with the rest.
      if (streamed && entries.length > 0) {
        const list = [...entries];
        value.entry = list;
        if (list.some(holdsLiterals)) {
          recordLiteral(list);
          recordLiteral(value);
        }
      } else if (streamed) delete value.entry;
      // As parseFhirXml: each element nests its value at most two levels below its parent's.
      return opts.plain || 2 * reader.depth - 1 <= MAX_JSON_DEPTH ? value : jsonValue(stringifyExact(value), what);
    },
    requireHeadOf(index) {
      if (ended === undefined) throw new Error('requireHeadOf() before end()');
      if (!streamed) return;
      // The root's children up to entry `index`, which holds an empty element in its place (as each entry before it).
      let seen = -1;
      const head = ended.children.findIndex((c) => c.kind === 'element' && c.ns === FHIR_NS && c.local === 'entry' && ++seen === index);
      readResource({ ...ended, children: ended.children.slice(0, head + 1) }, reader.slice, '');
    },
  };
}
