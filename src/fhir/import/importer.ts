import type { FhirError, FhirIssue } from '../../errors.ts';
import { noteValidationLevel, requireProfiles, unlimitedReach, validationLevel, type FhirDeps } from '../crud.ts';
import { unchangedOutcome } from '../outcome.ts';
import { storesSameMeasured, type PreparedVersion } from '../prepared.ts';
import type { Access } from '../access.ts';
import { carryLiterals } from '../exact-json.ts';
import { createBatchWriter, DEFAULT_BATCH_LIMITS, type BatchOptions } from './batches.ts';
import { createDeferredQueue } from './deferred.ts';
import { documentNotUtf8, importDocument, parseResource, type DocumentContext, type DocumentFormat } from './document.ts';
import { addLoose, type IssuePlace, type LooseContext } from './loose.ts';
import { CHUNK_CHARS, CHUNK_RESOURCES, idOfLine, type PreparedChunk } from './ndjson.ts';
import type { LineIds } from './line-ids.ts';
import { createPreparer, type Preparer } from './preparer.ts';
import { importProfiles } from './profiles.ts';
import { createRunReferences } from './run-references.ts';
import { decodedText, importXmlDocument } from './xml-document.ts';
import { decodeUtf8, NotUtf8Error } from '../utf8.ts';

/** `place` without its undefined members, so that an issue lists only what applies. */
function definedOf(place: IssuePlace | undefined): IssuePlace {
  const out: IssuePlace = {};
  if (place?.line !== undefined) out.line = place.line;
  if (place?.entry !== undefined) out.entry = place.entry;
  if (place?.reference !== undefined) out.reference = place.reference;
  if (place?.issues !== undefined) out.issues = place.issues;
  return out;
}

/** Why a line naming a stored AuditEvent with other content is not imported (see ImportOptions.auditAppendOnly). */
function auditRefusal(id: string): { message: string; issues: FhirIssue[] } {
  const message = `AuditEvent/${id} is stored already, and an AuditEvent cannot be updated: the audit trail is append-only`;
  return { message, issues: [{ severity: 'error', code: 'not-supported', details: { text: message }, diagnostics: message, expression: ['AuditEvent.id'] }] };
}

/**
 * A resource that could not be imported: file, 1-based line (NDJSON) or Bundle entry index, the
 * reference concerned (an unresolved `urn:` one), why, and an invalid resource's problems (`issues`).
 * With `severity` 'warning', a resource imported all the same: one validation refuses that equals its
 * current version, kept unchanged (its `issues`: that it is unchanged, then its problems as warnings).
 */
export interface ImportIssue extends IssuePlace {
  file: string;
  message: string;
  severity?: 'warning';
}

/** Where a version validation refused was read: its file, line or Bundle entry. */
function placeOf(v: PreparedVersion, reading: string): Pick<ImportIssue, 'file' | 'line' | 'entry'> {
  return { file: v.refusal?.file ?? reading, ...(v.line !== undefined && { line: v.line }), ...(v.refusal?.entry !== undefined && { entry: v.refusal.entry }) };
}

/** The failure of a version validation refused that changes its resource. */
function refusalIssue(v: PreparedVersion, reading: string): ImportIssue {
  return { ...placeOf(v, reading), message: v.refusal!.message, ...(v.refusal!.issues && { issues: v.refusal!.issues }) };
}

/** The warning of a refused version kept unchanged (it equals its current version `versionId`), as a REST update's outcome tells it. */
function keptWarning(v: PreparedVersion, versionId: number, reading: string): ImportIssue {
  const issues = unchangedOutcome(v.type, v.id, versionId, v.refusal?.issues ?? []).issue as FhirIssue[];
  return { ...placeOf(v, reading), severity: 'warning', message: issues[0]!.details!.text!, issues };
}

/**
 * Running totals; `imported` counts the resources stored or found already stored, `unchanged` those of
 * them that equalled their current version (no version was written); `bytesRead` counts the input
 * files' bytes consumed so far.
 */
export interface ImportProgress {
  imported: number;
  unchanged: number;
  failed: number;
  bytesRead: number;
}

export interface ImportOptions {
  tenant: string;
  /** The tenant's FHIR base URL (resolves absolute request URLs in transaction Bundles). */
  fhirBase: string;
  /** Resources per write transaction (at most; a batch also ends at 32 Mi characters of stored text). */
  batchSize?: number;
  onIssue(issue: ImportIssue): void;
  /** Called after each committed batch and each finished file. */
  onProgress(progress: Readonly<ImportProgress>): void;
  /** Stops reading at the next chunk when aborted (`add` then throws the signal's reason; call `finish` to commit what is queued). */
  signal?: AbortSignal;
  /**
   * A line that would change a stored AuditEvent fails instead of being written (BatchOptions.auditAppendOnly):
   * `$import`, which writes for a client, to whom the audit trail is append-only. `cinder import` is the operator's.
   */
  auditAppendOnly?: boolean;
  /** Run last in each batch's transaction; what it throws rolls the batch back and stops the import (BatchOptions.fence). */
  fence?: BatchOptions['fence'];
  /**
   * The access whose reach the import's issues keep to (`$import`: the job's client's registered scopes): a
   * QuestionnaireResponse's problems name nothing of a Questionnaire it may not read. Absent: the operator's.
   */
  access?: Access;
}

type ImportFormat = 'ndjson' | DocumentFormat;

/** A named input, e.g. `Bun.file(path)`. */
export interface ImportSource {
  name: string;
  blob: Blob;
  /** Its format when known (an `$import` input is NDJSON); otherwise told by its name or first characters. */
  format?: ImportFormat;
  /** The type of every resource of an NDJSON source (an `$import` input's `type`): one of another type is a failed line. */
  type?: string;
  /**
   * The ids of an NDJSON source's id-less lines, each a function of its line (line-ids.ts), for a source
   * that may be read again (an `$import` input resumed): otherwise each gets a random id.
   */
  ids?: LineIds;
}

/**
 * `.ndjson`/`.jsonl` are NDJSON, `.json` one JSON document, `.xml` one FHIR XML document; otherwise
 * XML when the first character after any BOM and whitespace is `<` (no JSON text starts so), NDJSON
 * when the first line holds a complete JSON value by itself (a pretty-printed document's first line
 * does not), else one JSON document.
 */
async function detectFormat(source: ImportSource): Promise<ImportFormat> {
  if (source.format) return source.format;
  if (/\.(ndjson|jsonl)$/i.test(source.name)) return 'ndjson';
  if (/\.json$/i.test(source.name)) return 'json';
  if (/\.xml$/i.test(source.name)) return 'xml';
  const head = await source.blob.slice(0, 1 << 16).text();
  if (/^\uFEFF?\s*</.test(head)) return 'xml';
  const nl = head.indexOf('\n');
  if (nl < 0) return 'json';
  try {
    JSON.parse(head.slice(0, nl));
    return 'ndjson';
  } catch {
    return 'json';
  }
}

/** A JSON document's text, or the failure of one that is not UTF-8 (its bytes are let go once decoded: a document may be large). */
async function documentText(blob: Blob): Promise<string | FhirError> {
  try {
    return decodeUtf8(await blob.bytes());
  } catch (err) {
    if (!(err instanceof NotUtf8Error)) throw err;
    return documentNotUtf8(err, 'json');
  }
}

/**
 * Bulk import into one tenant (the `cinder import` domain logic): NDJSON streamed line by line, XML
 * documents read as a stream (a collection Bundle's entries imported as each is read), JSON documents (a
 * resource, or a transaction, batch or collection Bundle) read whole. Each resource is
 * validated before it joins a batch, so a bad line is reported and never rolls back good ones.
 */
export function createImporter(deps: FhirDeps, opts: ImportOptions) {
  const progress: ImportProgress = { imported: 0, unchanged: 0, failed: 0, bytesRead: 0 };
  const report = () => opts.onProgress(progress);
  const limits = { ...DEFAULT_BATCH_LIMITS, resources: opts.batchSize ?? DEFAULT_BATCH_LIMITS.resources };
  // The source being read: a refused line (auditAppendOnly) is told as its batch commits, which holds lines of it or of
  // the one before; `$import`, the one importer refusing any, reads a single source.
  let reading = '';
  const fail = (issue: ImportIssue, count = 1) => {
    progress.failed += count;
    opts.onIssue(issue);
  };
  // A client's import keeps a refused line unchanged only where a REST update would (crud.ts refusedNoOp); the operator's always.
  const access = opts.access;
  const keepsUnchanged = access && ((type: string) => unlimitedReach(access, type));
  const writer = createBatchWriter(deps, opts.tenant, limits, (n, unchanged, refused, kept) => {
    progress.imported += n;
    progress.unchanged += unchanged;
    // A refused version is here when it changed its resource after all (a write in between, an earlier line of the
    // run): told as it fails. One kept unchanged is told so only now, as its transaction found it.
    for (const v of refused) fail(v.refusal ? refusalIssue(v, reading) : { ...placeOf(v, reading), ...auditRefusal(v.id) });
    for (const k of kept) opts.onIssue(keptWarning(k.version, k.versionId, reading));
    report();
  }, { auditAppendOnly: opts.auditAppendOnly === true, ...(opts.fence && { fence: opts.fence }), ...(keepsUnchanged && { keepsUnchanged }) });
  /**
   * Whether a version validation refused equals its stored version, as read now (one read by key, for a refused
   * line only): it is then queued, and its batch's transaction tests it again (BatchWriter), keeping it unchanged
   * and telling so as the batch commits, or failing it should a write in between (or an earlier line of the run)
   * have changed the resource; otherwise the caller fails it at once, in input order.
   */
  const sameAsStored = async (v: PreparedVersion): Promise<boolean> => {
    const same = await storedEqual(v);
    // Its batch then keeps it by this version's number, without reading and comparing its text again (batches.ts).
    if (same !== undefined) v.sameAs = { versionId: same.versionId, lastUpdated: same.lastUpdated };
    return same !== undefined;
  };
  /**
   * The current version `v` equals (sameAsStored), if any: a stored text of another length than `v` would store is told
   * by its length alone (ResourceRepo.measured, storesSameMeasured), not read.
   */
  const storedEqual = async (v: PreparedVersion): Promise<{ versionId: number; lastUpdated: number } | undefined> => {
    if (keepsUnchanged && !keepsUnchanged(v.type)) return undefined;
    const repo = deps.store.resources;
    const found = await repo.measured(opts.tenant, v.type, v.id);
    return found === null ? undefined : storesSameMeasured({ current: (type, id) => repo.read(opts.tenant, type, id) }, found, v);
  };
  // fullUrl -> Type/id of every Bundle entry written by this run, and the work waiting for some.
  const run = createRunReferences();
  const deferred = createDeferredQueue(run);
  // Set when the run starts (start): the profiles as stored then, and the deps that check them.
  let fhir: FhirDeps = deps;
  let preparer: Preparer | undefined;
  const looseContext = (source: ImportSource): LooseContext => ({
    writer, file: source.name, sameAsStored, run, validation: validationLevel(deps),
    profiles: (resource, at) => requireProfiles(fhir, opts.tenant, resource, at, undefined, opts.access),
    defer: deferred.defer,
    fail: (message, count, place) => fail({ file: source.name, ...definedOf(place), message }, count),
  });

  // NDJSON is read and prepared on a Worker thread while this thread writes, a batch and a chunk ahead.
  const ahead = Math.min(Math.ceil(limits.resources / CHUNK_RESOURCES), Math.ceil(limits.chars / CHUNK_CHARS)) + 1;

  /** Reads the tenant's profiles (profiles.ts) and readies the preparation thread, once. */
  async function start(): Promise<Preparer> {
    if (preparer) return preparer;
    await noteValidationLevel(deps, opts.tenant);
    const profiles = await importProfiles(deps, opts.tenant, opts.access);
    if (profiles) fhir = { ...deps, profiles: profiles.validator, ...(profiles.questionnaires ? { questionnaires: profiles.questionnaires } : {}) };
    return (preparer = createPreparer(ahead, validationLevel(deps), deps.fhirBase?.(opts.tenant), profiles));
  }

  /** A chunk's versions in line order, with its lines holding `urn:` references resolved here (rare). */
  async function addChunk(loose: LooseContext, chunk: PreparedChunk, ids: LineIds | undefined): Promise<void> {
    let from = 0;
    for (const u of chunk.urns) {
      await writer.addPrepared(chunk.versions.slice(from, (from = u.at)));
      const resource = parseResource(u.text);
      await addLoose(loose, { resource: carryLiterals(resource, { ...resource, id: resource.id ?? idOfLine(u.line, ids) }), line: u.line });
    }
    await writer.addPrepared(from ? chunk.versions.slice(from) : chunk.versions);
  }

  /**
   * The chunk's failures reported in line order, its refused lines among them unless they equal their stored version
   * (sameAsStored); the versions of those that do stay queued, for the batch to keep unchanged (BatchWriter), which
   * tells them as it commits.
   */
  async function screen(source: ImportSource, chunk: PreparedChunk): Promise<PreparedChunk> {
    if (!chunk.versions.some((v) => v.refusal !== undefined)) {
      for (const issue of chunk.issues) fail({ file: source.name, ...issue });
      return chunk;
    }
    const told: ImportIssue[] = chunk.issues.map((issue) => ({ file: source.name, ...issue }));
    const versions: PreparedVersion[] = [];
    // Per version, how many before it left the chunk: the `urn:` lines' places move by as many.
    const leftBefore = new Int32Array(chunk.versions.length + 1);
    for (const [i, v] of chunk.versions.entries()) {
      leftBefore[i] = i - versions.length;
      if (v.refusal !== undefined) {
        v.refusal.file = source.name;
        if (!(await sameAsStored(v))) {
          told.push(refusalIssue(v, reading));
          continue;
        }
      }
      versions.push(v);
    }
    leftBefore[chunk.versions.length] = chunk.versions.length - versions.length;
    told.sort((a, b) => (a.line ?? 0) - (b.line ?? 0));
    for (const issue of told) fail(issue);
    return { ...chunk, versions, urns: chunk.urns.map((u) => ({ ...u, at: u.at - leftBefore[u.at]! })) };
  }

  async function importNdjson(preparer: Preparer, source: ImportSource, input: number): Promise<void> {
    const loose = looseContext(source);
    for await (const prepared of preparer.chunks(input)) {
      const chunk = await screen(source, prepared);
      progress.bytesRead += chunk.bytes;
      opts.signal?.throwIfAborted();
      await (chunk.urns.length ? addChunk(loose, chunk, source.ids) : writer.addPrepared(chunk.versions));
    }
  }

  /** A JSON or XML document (XML read as a stream); `deferrable` false when it is read again at the end of the run (see deferred.ts). */
  async function importFile(source: ImportSource, format: DocumentFormat, deferrable = true): Promise<void> {
    const ctx: DocumentContext = {
      ...looseContext(source), tenant: opts.tenant, fhirBase: opts.fhirBase,
      again: () => importFile(source, format, false),
      imported: (n, unchanged) => {
        progress.imported += n;
        progress.unchanged += unchanged;
      },
      kept: (entry, issues) => opts.onIssue({ file: source.name, entry, severity: 'warning', message: issues[0]!.details?.text ?? issues[0]!.diagnostics ?? 'unchanged', issues }),
    };
    if (format === 'xml') {
      const text = decodedText(source.blob.stream(), deferrable ? (n) => (progress.bytesRead += n) : undefined);
      return importXmlDocument(fhir, ctx, text, deferrable);
    }
    const text = await documentText(source.blob);
    if (deferrable) progress.bytesRead += source.blob.size;
    if (typeof text !== 'string') return ctx.fail(text.message, 1, text.issues[0]!.expression ? { issues: text.issues } : undefined);
    await importDocument(fhir, ctx, text, deferrable);
  }

  return {
    progress: progress as Readonly<ImportProgress>,
    /**
     * Imports the sources in order; resolves when their resources are queued (call `finish` to commit
     * the rest). Every NDJSON source is handed to the preparation thread at once, so it never waits
     * between files.
     */
    async add(sources: ImportSource[]): Promise<void> {
      const preparer = await start();
      const formats = await Promise.all(sources.map(detectFormat));
      const inputs = sources.map((s, i) => (formats[i] === 'ndjson' ? preparer.queue(s.blob, s.type, s.ids) : -1));
      for (const [i, source] of sources.entries()) {
        reading = source.name;
        if (inputs[i]! >= 0) await importNdjson(preparer, source, inputs[i]!);
        else await importFile(source, formats[i] as DocumentFormat);
        report();
      }
    },
    /**
     * Imports what was deferred (Bundles and resources referring to fullUrls written later in the run;
     * what stays unresolved is reported), commits every queued resource and ends the preparation thread.
     */
    async finish(): Promise<void> {
      try {
        await deferred.settle();
        await writer.drain();
      } finally {
        preparer?.close();
      }
      report();
    },
  };
}
