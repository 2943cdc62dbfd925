import { FhirError } from '../errors.ts';
import type { ResourceVersion, ResourceWriter } from '../store/types.ts';
import { parseBundle, type Entry } from './bundle-entries.ts';
import { etag } from './bundle.ts';
import { deleteVersion, putVersion, readResource, type FhirDeps, type FhirRequest, type PutOptions } from './crud.ts';
import { operationOutcome } from './outcome.ts';
import { walkReferences } from './references.ts';
import { newId } from './resource.ts';
import { searchResources } from './search.ts';

type Json = Record<string, unknown>;

interface Planned {
  entry: Entry;
  /** Resolved target id (new for POST). */
  id?: string;
  /** POST matched by ifNoneExist: nothing is written. */
  existing?: ResourceVersion;
}

/** Resolves a conditional query to at most one current resource (FHIR R4 conditional interactions). */
async function resolveCondition(deps: FhirDeps, req: FhirRequest, type: string, query: URLSearchParams, where: string) {
  const params = new URLSearchParams(query);
  params.set('_count', '2');
  const { rows } = await searchResources(deps, req, type, params, true);
  if (rows.length > 1) throw new FhirError('precondition', `${where}: condition '${type}?${query}' matches more than one resource`);
  return rows[0];
}

async function plan(deps: FhirDeps, req: FhirRequest, entries: Entry[]): Promise<{ planned: Planned[]; ids: Map<string, string> }> {
  const ids = new Map<string, string>();
  const planned: Planned[] = [];
  for (const entry of entries) {
    const p: Planned = { entry };
    const where = `Bundle.entry[${entry.index}]`;
    if (entry.condition) {
      const match = await resolveCondition(deps, req, entry.type, entry.condition, where);
      if (entry.method === 'POST' && match) p.existing = match;
      if (match) p.id = match.id;
      else if (entry.method === 'PUT') p.id = entry.resource!.id ?? newId();
    } else if (entry.method !== 'GET') {
      p.id = entry.id ?? newId();
    }
    if (entry.fullUrl && p.id && entry.method !== 'DELETE') {
      if (ids.has(entry.fullUrl)) throw new FhirError('invalid', `${where}: fullUrl '${entry.fullUrl}' is used twice`);
      ids.set(entry.fullUrl, `${entry.type}/${p.id}`);
    }
    planned.push(p);
  }
  return { planned, ids };
}

/** Rewrites `urn:uuid:` and conditional references (FHIR R4 http 3.1.0.11.2). */
async function rewriteReferences(deps: FhirDeps, req: FhirRequest, planned: Planned[], ids: Map<string, string>) {
  for (const p of planned) {
    const r = p.entry.resource;
    if (!r || p.existing) continue;
    const conditional: { reference: string }[] = [];
    walkReferences(r, (holder) => {
      const mapped = ids.get(holder.reference);
      if (mapped) holder.reference = mapped;
      else if (holder.reference.startsWith('urn:uuid:') || holder.reference.startsWith('urn:oid:')) {
        throw new FhirError('invalid', `Bundle.entry[${p.entry.index}]: reference '${holder.reference}' matches no fullUrl in the Bundle`);
      } else if (/^[A-Z][A-Za-z]+\?/.test(holder.reference)) conditional.push(holder);
    });
    for (const holder of conditional) {
      const [type, query] = holder.reference.split('?', 2) as [string, string];
      const match = await resolveCondition(deps, req, type, new URLSearchParams(query), `Bundle.entry[${p.entry.index}]`);
      if (!match) throw new FhirError('precondition', `Bundle.entry[${p.entry.index}]: conditional reference '${holder.reference}' matches nothing`);
      holder.reference = `${type}/${match.id}`;
    }
  }
}

function responseEntry(status: string, v?: ResourceVersion, base?: string): Json {
  const response: Json = { status };
  if (v && base) {
    response.location = `${base}/${v.type}/${v.id}/_history/${v.versionId}`;
    response.etag = etag(v.versionId);
    response.lastModified = new Date(v.lastUpdated).toISOString();
  }
  return { response };
}

async function writeEntry(w: ResourceWriter, p: Planned, opts: PutOptions, base: string): Promise<Json> {
  const { entry } = p;
  const o: PutOptions = { ...opts };
  if (entry.ifMatch) {
    const m = /^(?:W\/)?"(\d+)"$/.exec(entry.ifMatch);
    if (!m) throw new FhirError('invalid', `Bundle.entry[${entry.index}]: malformed ifMatch '${entry.ifMatch}'`);
    o.ifMatch = Number(m[1]);
  }
  if (entry.method === 'DELETE') {
    if (!p.id) return responseEntry('204 No Content');
    const v = await deleteVersion(w, entry.type, p.id, o);
    return responseEntry(v ? '204 No Content' : '404 Not Found');
  }
  if (p.existing) return responseEntry('200 OK', p.existing, base);
  const { version, created } = await putVersion(w, entry.resource!, p.id!, o);
  return { ...responseEntry(created ? '201 Created' : '200 OK', version, base), resource: JSON.parse(version.content) };
}

async function readEntry(deps: FhirDeps, req: FhirRequest, entry: Entry, base: string): Promise<Json> {
  if (entry.id) {
    const v = await readResource(deps, req, entry.type, entry.id);
    return { ...responseEntry('200 OK', v, base), resource: JSON.parse(v.content) };
  }
  const r = await searchResources(deps, req, entry.type, entry.query!, false);
  const bundle = {
    resourceType: 'Bundle', type: 'searchset', total: r.total,
    entry: r.rows.map((v) => ({ fullUrl: `${base}/${v.type}/${v.id}`, resource: JSON.parse(v.content) })),
  };
  return { ...responseEntry('200 OK'), resource: bundle };
}

const ORDER: Record<string, number> = { DELETE: 0, POST: 1, PUT: 2, GET: 3 };

/** A transaction: every entry or none (FHIR R4 http 3.1.0.11.2), in DELETE, POST, PUT, GET order. */
async function transaction(deps: FhirDeps, req: FhirRequest, entries: Entry[], base: string): Promise<Json[]> {
  const { planned, ids } = await plan(deps, req, entries);
  const seen = new Set<string>();
  for (const p of planned) {
    if (!p.id || p.entry.method === 'GET' || p.existing) continue;
    const key = `${p.entry.type}/${p.id}`;
    if (seen.has(key)) throw new FhirError('invalid', `Bundle.entry[${p.entry.index}]: ${key} is the target of more than one entry`);
    seen.add(key);
  }
  await rewriteReferences(deps, req, planned, ids);
  const sorted = [...planned].sort((a, b) => ORDER[a.entry.method]! - ORDER[b.entry.method]! || a.entry.index - b.entry.index);
  const out: Json[] = new Array(entries.length);
  const opts: PutOptions = { now: deps.clock.now(), access: req.access };
  await deps.store.resources.write(req.tenant, async (w) => {
    for (const p of sorted) if (p.entry.method !== 'GET') out[p.entry.index] = await writeEntry(w, p, opts, base);
  });
  for (const p of sorted) if (p.entry.method === 'GET') out[p.entry.index] = await readEntry(deps, req, p.entry, base);
  return out;
}

/** A batch: each entry on its own; failures become entries with an OperationOutcome. */
async function batch(deps: FhirDeps, req: FhirRequest, entries: Entry[], base: string): Promise<Json[]> {
  const out: Json[] = [];
  for (const entry of entries) {
    try {
      if (entry.method === 'GET') {
        out.push(await readEntry(deps, req, entry, base));
        continue;
      }
      const { planned, ids } = await plan(deps, req, [entry]);
      await rewriteReferences(deps, req, planned, ids);
      const opts: PutOptions = { now: deps.clock.now(), access: req.access };
      out.push(await deps.store.resources.write(req.tenant, (w) => writeEntry(w, planned[0]!, opts, base)));
    } catch (err) {
      if (!(err instanceof FhirError)) throw err;
      out.push({ response: { status: String(err.status), outcome: operationOutcome(err.issues) } });
    }
  }
  return out;
}

/** Processes a transaction or batch Bundle posted to the FHIR base and returns the response Bundle. */
export async function processBundle(deps: FhirDeps, req: FhirRequest, body: unknown, base: string): Promise<Json> {
  const { type, entries } = parseBundle(body, base);
  const out = type === 'transaction' ? await transaction(deps, req, entries, base) : await batch(deps, req, entries, base);
  return { resourceType: 'Bundle', id: newId(), type: `${type}-response`, entry: out };
}
