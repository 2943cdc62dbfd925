import { nextTurn, pacedTurns, WORK_SLICE_MS } from '../turns.ts';
import { parseFhirXml, type XmlSource } from './from-xml.ts';
import { streamFhirXml, type StreamedEntry } from './from-xml-stream.ts';

/** How much text is read between two looks at the clock (UTF-16 code units). */
export const XML_SLICE = 64 * 1024;

export interface PacedXml {
  /** Text read per look at the clock (XML_SLICE). */
  slice?: number;
  /** Time read before a turn (WORK_SLICE_MS). */
  budgetMs?: number;
  /** The turn awaited (a macrotask by default). */
  turn?: () => Promise<void>;
}

/**
 * FHIR XML text as parseFhirXml reads it (the same JSON, the same 400s), read in slices that let the event
 * loop turn every `budgetMs`: a 64 MiB transaction Bundle in XML took 2-4 s of one thread in one call, which
 * held every other request of the process (R4 xml.html; the body limits are in README's configuration).
 * A Bundle's entries leave the XML tree as each completes (streamFhirXml), so the pauses stay short however
 * many there are; a document of another type is kept whole, its text joined in doubling steps, the last of
 * which reads half of it at once (a resource body is at most CINDER_MAX_RESOURCE_BYTES). Text of one slice
 * or less is read in one call, as before.
 */
export async function parseFhirXmlPaced(source: string, opts: XmlSource = {}, pacing: PacedXml = {}): Promise<unknown> {
  const { slice = XML_SLICE, budgetMs = WORK_SLICE_MS, turn = nextTurn } = pacing;
  if (source.length <= slice) return parseFhirXml(source, opts);
  const stream = streamFhirXml({ ...opts, values: true });
  const entries: Record<string, unknown>[] = [];
  // The first entry that is not FHIR XML: what parseFhirXml reports, once the document is known to be
  // well-formed and the Bundle's own elements before that entry are (parseFhirXml reads in document order).
  let refused: StreamedEntry | undefined;
  const keep = (found: StreamedEntry[]) => {
    for (const e of found) {
      if (e.error) refused ??= e;
      else if (refused === undefined) entries.push(e.value!);
    }
  };
  const pace = pacedTurns(budgetMs, turn);
  for (let at = 0; at < source.length; ) {
    let end = Math.min(at + slice, source.length);
    // A surrogate pair stays in one slice.
    if (end < source.length && isHighSurrogate(source.charCodeAt(end - 1))) end++;
    keep(stream.push(source.slice(at, end)));
    at = end;
    await pace();
  }
  keep(stream.end());
  if (refused) {
    stream.requireHeadOf(refused.index);
    throw refused.error;
  }
  return stream.documentOf(entries);
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}
