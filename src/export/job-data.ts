/**
 * The stored data of an export job, the one place that writes and reads it. A job outlives the
 * release that accepted it (a rolling upgrade, a crash followed by an upgrade), so its data carries a
 * `version`, is checked against a schema when read, and holds the planned steps: a resumed job runs
 * the plan it was given, never one recomputed by newer code. Data this release cannot read is a
 * JobDataError, which fails the job cleanly instead of letting it run the wrong step.
 */
import { z } from 'zod';
import type { Condition, ExportJob } from '../store/types.ts';
import { planSteps, type ExportSpec, type JobProgress, type Step } from './spec.ts';

/**
 * The newest version of the data this release writes and reads. 0 is what releases before versioning
 * wrote: the spec without `version` and `steps` (their plan was `planSteps` of the spec, which is kept as
 * it was for them). 2 stores `_typeFilter` as compiled search conditions; 0 and 1 stored token criteria,
 * read as conditions. 3 is 2 whose conditions use `_filter`'s comparisons (search_filter.html) that a
 * release reading 2 would take for others (a folded or `unequal` token, a string `unequal` or ordering,
 * a date `co`: FILTER_COMPARISONS), so that such a release fails the job rather than export other
 * resources; a job without them is written as 2, which it reads.
 */
export const JOB_DATA_VERSION = 3;

/** The data version of conditions 2 reads. */
const CONDITIONS_V2 = 2;

export class JobDataError extends Error {
  override name = 'JobDataError';
}

const issue = z.object({
  severity: z.enum(['fatal', 'error', 'warning', 'information']),
  code: z.string(),
  diagnostics: z.string().optional(),
  details: z.object({ text: z.string() }).optional(),
  expression: z.array(z.string()).optional(),
});

const timeCriterion = z.object({ op: z.enum(['eq', 'ne', 'gt', 'ge', 'lt', 'le']), low: z.number(), high: z.number() });
const paramCriterion = z.object({ param: z.string(), values: z.array(z.object({ system: z.string().optional(), value: z.string().optional() })) });
const snapshotFilter = z.object({
  ids: z.array(z.string()).optional(),
  lastUpdated: z.array(timeCriterion).optional(),
  params: z.array(paramCriterion).optional(),
});

const KINDS = ['id', 'lastUpdated', 'token', 'string', 'uri-prefix', 'token-text', 'text', 'date', 'number', 'composite', 'missing', 'near', 'compartment', 'chain', 'has', 'or', 'not', 'and'] as const;
/** Every kind of Condition is listed (a kind missing from KINDS fails to compile here). */
const KINDS_COMPLETE: Exclude<Condition['kind'], (typeof KINDS)[number]> extends never ? true : never = true;
void KINDS_COMPLETE;
/** Compiled conditions are checked for their kind; their shape is this release's (src/store/types.ts Condition). */
const condition = z.looseObject({ kind: z.enum(KINDS) });

const specBase = z.object({
  level: z.enum(['system', 'patient', 'group']),
  groupId: z.string().optional(),
  types: z.array(z.string()),
  since: z.number().optional(),
  elements: z.record(z.string(), z.array(z.string())).optional(),
  compartment: z.enum(['any', 'job']).optional(),
  joinedSince: z.boolean(),
  provenance: z.enum(['none', 'compartment', 'relevant', 'latest']),
  issues: z.array(issue),
  fhirBase: z.string().optional(),
});

const specV0 = specBase.extend({ filters: z.record(z.string(), z.array(snapshotFilter)) });

const step = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('type'), type: z.string() }),
  z.object({ kind: z.literal('provenance'), mode: z.enum(['relevant', 'compartment']) }),
  // A release that does not know these refuses the job (JobDataError) instead of leaving the joined members' Provenance out.
  z.object({ kind: z.literal('provenance-joined'), mode: z.enum(['relevant', 'compartment']) }),
  z.object({ kind: z.literal('provenance-scan') }),
  z.object({ kind: z.literal('provenance-scan-joined') }),
  z.object({ kind: z.literal('provenance-emit') }),
  z.object({ kind: z.literal('errors') }),
]);

const specV1 = specV0.extend({ version: z.literal(1), steps: z.array(step).min(1) });
const specV2 = specBase.extend({
  version: z.union([z.literal(CONDITIONS_V2), z.literal(JOB_DATA_VERSION)]),
  filters: z.record(z.string(), z.array(z.array(condition))),
  // Optional: a release that does not know it reads the (already narrowed) filters and refuses
  // downloads to filtered tokens, as it refused their kick-offs.
  scopeFilters: z.record(z.string(), z.array(z.array(condition))).optional(),
  // Written with provenance 'compartment', which a release that does not know it refuses (JobDataError).
  provenanceTargets: z.record(z.string(), z.array(z.array(condition))).optional(),
  // Optional: a release that does not know them refuses downloads to patient-bound tokens (its
  // mayExport), as it refused their kick-offs, and shows the job to every token of its client.
  bound: z.object({ patient: z.string(), types: z.array(z.string()) }).optional(),
  ownerPatient: z.string().optional(),
  // Optional: a release that does not know it shows the job to every token of its client and patient.
  ownerUser: z.string().optional(),
  // Optional: a release that does not know it exports every Binary, as releases before it did.
  binaryContexts: z.array(z.string()).optional(),
  steps: z.array(step).min(1),
});

type LegacyFilter = z.infer<typeof snapshotFilter>;

/** A filter of data versions 0 and 1 (token criteria on the rows they indexed) as compiled conditions. */
function legacyConditions(f: LegacyFilter): Condition[] {
  const out: Condition[] = [];
  if (f.ids) out.push({ kind: 'id', ids: f.ids });
  if (f.lastUpdated) out.push({ kind: 'lastUpdated', tests: f.lastUpdated });
  for (const p of f.params ?? []) out.push({ kind: 'token', param: p.param, values: p.values });
  return out;
}

function legacySpec(data: z.infer<typeof specV0>): ExportSpec {
  const filters: Record<string, Condition[][]> = {};
  for (const [type, list] of Object.entries(data.filters)) filters[type] = list.map(legacyConditions);
  const { filters: _, ...rest } = data;
  return { ...rest, filters } as ExportSpec;
}

const fileRecord = z.object({
  kind: z.enum(['output', 'deleted', 'error']),
  type: z.string(),
  subject: z.string(),
  name: z.string(),
  key: z.string(),
  count: z.number().int().min(0),
  bytes: z.number().int().min(0),
});

const progress = z.object({
  step: z.number().int().min(0),
  after: z.union([z.number(), z.string(), z.null()]),
  part: z.number().int().min(1),
  deletedPart: z.number().int().min(1),
  files: z.array(fileRecord),
  exported: z.number().int().min(0),
  issues: z.array(issue),
  unlisted: z.number().int().min(0).optional(),
});

/** What kick-off decided and the steps it planned. */
export interface JobPlan {
  spec: ExportSpec;
  steps: Step[];
}

/** Whether a condition, or one it nests, is one of `_filter`'s comparisons new in data version 3. */
function filterComparison(c: Condition): boolean {
  switch (c.kind) {
    case 'token': return c.fold === true || c.unequal === true;
    case 'string': return c.values.some((v) => FILTER_COMPARISONS.has(v.match));
    case 'date': case 'lastUpdated': return c.tests.some((t) => t.op === 'co');
    case 'chain': case 'has': return c.where.some(filterComparison);
    case 'or': return c.any.some(filterComparison);
    case 'and': return c.all.some(filterComparison);
    case 'not': return filterComparison(c.condition);
    default: return false;
  }
}

/** String matches of `_filter` that data version 2 does not have. */
const FILTER_COMPARISONS = new Set<string>(['unequal', 'gt', 'ge', 'lt', 'le']);

/** The data version a spec needs: 3 where its conditions use `_filter`'s newer comparisons, else 2. */
function dataVersion(spec: ExportSpec): number {
  const lists = [spec.filters, spec.scopeFilters ?? {}, spec.provenanceTargets ?? {}].flatMap((m) => Object.values(m).flat(2));
  return lists.some(filterComparison) ? JOB_DATA_VERSION : CONDITIONS_V2;
}

/** The spec column of a new job: the spec, the data version it needs (dataVersion), and the plan. */
export function encodeSpec(spec: ExportSpec): string {
  return JSON.stringify({ version: dataVersion(spec), ...spec, steps: planSteps(spec) });
}

export function encodeProgress(p: JobProgress): string {
  return JSON.stringify(p);
}

function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new JobDataError(`the job's ${what} is not JSON`, { cause: err });
  }
}

function unreadable(what: string, error: z.ZodError): JobDataError {
  const first = error.issues[0]!;
  return new JobDataError(`the job's ${what} does not match this version of Cinder (${first.path.join('.') || 'root'}: ${first.message})`);
}

/** The job's spec and plan, upgraded from older data versions; JobDataError when this release cannot read it. */
export function readPlan(job: Pick<ExportJob, 'spec'>): JobPlan {
  const raw = parseJson(job.spec, 'spec');
  const version = (raw as { version?: unknown } | null)?.version ?? 0;
  if (version === 0) {
    const parsed = specV0.safeParse(raw);
    if (!parsed.success) throw unreadable('spec', parsed.error);
    const spec = legacySpec(parsed.data);
    return { spec, steps: planSteps(spec, true) };
  }
  if (version === 1) {
    const parsed = specV1.safeParse(raw);
    if (!parsed.success) throw unreadable('spec', parsed.error);
    const { version: _, steps, ...data } = parsed.data;
    return { spec: legacySpec(data), steps };
  }
  if (version !== CONDITIONS_V2 && version !== JOB_DATA_VERSION) {
    throw new JobDataError(`the job was stored by another version of Cinder (job data version ${JSON.stringify(version)}; this one reads 0 to ${JOB_DATA_VERSION})`);
  }
  const parsed = specV2.safeParse(raw);
  if (!parsed.success) throw unreadable('spec', parsed.error);
  const { version: _, steps, ...spec } = parsed.data;
  return { spec: spec as unknown as ExportSpec, steps };
}

/** The job's progress (the same in data versions 0 and 1); JobDataError when it cannot be read. */
export function readProgress(job: Pick<ExportJob, 'progress'>, steps?: Step[]): JobProgress {
  const parsed = progress.safeParse(parseJson(job.progress, 'progress'));
  if (!parsed.success) throw unreadable('progress', parsed.error);
  if (steps && parsed.data.step > steps.length) throw new JobDataError(`the job's progress is at step ${parsed.data.step + 1} of a plan of ${steps.length}`);
  return parsed.data as JobProgress;
}

/**
 * The patient and the signed-in user a job belongs to beside its client (ExportSpec.ownerPatient and
 * ownerUser), read alone so that the job's owners are known whatever else its data holds.
 */
export function ownersOf(job: Pick<ExportJob, 'spec'>): { patient?: string; user?: string } {
  let spec: { ownerPatient?: unknown; ownerUser?: unknown } | null;
  try {
    spec = JSON.parse(job.spec) as typeof spec;
  } catch {
    return {};
  }
  const owners: { patient?: string; user?: string } = {};
  if (typeof spec?.ownerPatient === 'string') owners.patient = spec.ownerPatient;
  if (typeof spec?.ownerUser === 'string') owners.user = spec.ownerUser;
  return owners;
}

/** What a failed job's status says when its data cannot be read. */
export function unreadableReason(err: JobDataError): string {
  return `This export cannot be resumed: ${err.message}. Start a new export.`;
}
