import { FhirError } from '../../errors.ts';
import type { FhirDeps } from '../crud.ts';
import { asResource, requireStorable, type Resource } from '../resource.ts';
import { jsonValue } from '../xml/from-xml.ts';
import { streamFhirXml, type StreamedEntry } from '../xml/from-xml-stream.ts';
import { NotUtf8Error, utf8Stream } from '../utf8.ts';
import { collectionItem, documentNotUtf8, importResource, locatedXmlError, type DocumentContext } from './document.ts';
import { addLoose } from './loose.ts';

/** Text that is not well-formed XML, as an import names it (with its line and column), as malformed JSON is named. */
const malformed = (err: Error) => new FhirError('structure', `malformed XML: ${err.message}`, { cause: err });

/**
 * The text of a byte stream, decoded from UTF-8 a chunk at a time (a leading BOM dropped); a 400 (documentNotUtf8)
 * at the first byte that is not UTF-8, once the text before it is handed on.
 */
export async function* decodedText(stream: ReadableStream<Uint8Array>, onBytes?: (n: number) => void): AsyncGenerator<string> {
  // The text handed on so far, for the error's line: held only as the count of its line breaks and its last line.
  let lines = 0;
  let last = '';
  const utf8 = utf8Stream(() => '\n'.repeat(lines) + last);
  const seen = (text: string): string => {
    const nl = text.lastIndexOf('\n');
    if (nl < 0) last += text;
    else {
      for (let at = text.indexOf('\n'); at >= 0 && at <= nl; at = text.indexOf('\n', at + 1)) lines++;
      last = text.slice(nl + 1);
    }
    return text;
  };
  const read = (decode: () => string): { text: string; refused?: NotUtf8Error } => {
    try {
      return { text: seen(decode()) };
    } catch (err) {
      if (!(err instanceof NotUtf8Error)) throw err;
      return { text: err.partial, refused: err };
    }
  };
  for await (const bytes of stream) {
    onBytes?.(bytes.byteLength);
    const { text, refused } = read(() => utf8.decode(bytes));
    // The text before a bad byte is handed on first: a collection's entries read before it are imported.
    yield text;
    if (refused) throw documentNotUtf8(refused, 'xml');
  }
  const { text, refused } = read(() => utf8.end());
  yield text;
  if (refused) throw documentNotUtf8(refused, 'xml');
}

/** What a document's failure is reported with: the element's path in the message and, for `--json`, in the issue. */
function reportDocument(ctx: DocumentContext, err: FhirError): void {
  const located = locatedXmlError(err);
  ctx.fail(located.message, 1, located.issues[0]?.expression ? { issues: located.issues } : undefined);
}

/**
 * Imports one FHIR XML document read as a stream (R4 xml.html). A collection Bundle's entries are imported
 * as each is read (its memory: the largest entry), each on its own as an NDJSON line is: an entry that
 * is not FHIR XML, or whose resource cannot be stored, is reported with its index and skipped, and one
 * referring to a later entry's fullUrl waits for the end of the run (deferred.ts); text that stops being
 * XML part-way is reported, and the entries read before it stay imported. Any other document (a
 * transaction or batch Bundle, which is processed whole, a resource) is read first, its entries kept as
 * JSON text, not as an XML tree, then imported as the same document in JSON is (importResource).
 */
export async function importXmlDocument(deps: FhirDeps, ctx: DocumentContext, text: AsyncIterable<string>, deferrable: boolean): Promise<void> {
  const stream = streamFhirXml({ what: 'The resource', malformed });
  const kept: string[] = [];
  // A collection's fullUrls as its entries are read (each has its id then), as importCollection maps them all:
  // entries that refer to each other (an Encounter and its diagnosis) resolve once the later one is read.
  const local = new Map<string, string>();
  let collection: boolean | undefined;
  const take = async (entries: StreamedEntry[]): Promise<void> => {
    for (const e of entries) {
      if (collection === undefined) collection = startCollection(stream.bundle);
      if (!collection) {
        if (e.error) throw e.error;
        kept.push(e.json!);
      } else await collectionEntry(ctx, e, local);
    }
  };
  let value: unknown;
  try {
    for await (const chunk of text) await take(stream.push(chunk));
    await take(stream.end());
    value = stream.document(kept);
  } catch (err) {
    if (!(err instanceof FhirError)) throw err;
    return reportDocument(ctx, err);
  }
  if (collection) return;
  let resource: Resource;
  try {
    resource = requireStorable(asResource(value));
  } catch (err) {
    if (!(err instanceof FhirError)) throw err;
    return reportDocument(ctx, err);
  }
  await importResource(deps, ctx, resource, deferrable);
}

/**
 * A collection Bundle's entry, imported as it is read (or reported with its index); `local`: the fullUrls of
 * the entries read so far, this one's added (one referring to a later entry waits for the end of the run).
 */
async function collectionEntry(ctx: DocumentContext, e: StreamedEntry, local: Map<string, string>): Promise<void> {
  let entry: unknown;
  try {
    if (e.error) throw e.error;
    entry = jsonValue(e.json!, 'The resource');
  } catch (err) {
    if (!(err instanceof FhirError)) throw err;
    const located = locatedXmlError(err);
    return ctx.fail(located.message, 1, { entry: e.index, issues: located.issues });
  }
  const item = collectionItem(ctx, entry, e.index);
  if (!item) return;
  if (item.fullUrl !== undefined) local.set(item.fullUrl, `${item.resource.resourceType}/${item.resource.id}`);
  await addLoose(ctx, { ...item, local });
}

/** Whether a Bundle (its elements before the first entry) is a collection whose entries are imported as read; one that cannot be stored is refused first. */
function startCollection(bundle: Record<string, unknown> | undefined): boolean {
  if (bundle?.type !== 'collection') return false;
  requireStorable(asResource(bundle));
  return true;
}
