import { outcomeIssues } from '../fhir/validation/check.ts';
import { isResourceType } from '../fhir/resource-types.ts';
import { countStored, validateStored } from '../fhir/validate-stored.ts';
import { UsageError, type Command } from './command.ts';
import { openContext, printData } from './context.ts';
import { createProgress, formatCount } from './progress.ts';
import { storeProfileValidator } from '../validation-terminology.ts';
import { QuestionnaireValidator } from '../fhir/validation/questionnaire/validator.ts';
import { readQuestionnaires, snapshotQuestionnaires } from '../fhir/validation/questionnaire/source.ts';
import { ProfileValidator } from '../fhir/validation/profile/profile-check.ts';
import { ProfileRegistry } from '../fhir/validation/profile/registry.ts';
import { readDefinitions, snapshotProfiles } from '../fhir/validation/profile/definitions.ts';

const WORDS = { task: 'validate', done: 'checked', failed: 'invalid' };

function types(value: unknown): string[] | undefined {
  if (value === undefined) return undefined;
  const list = (Array.isArray(value) ? value : [value]).flatMap((v) => String(v).split(',')).map((t) => t.trim()).filter(Boolean);
  for (const t of list) if (!isResourceType(t)) throw new UsageError(`--type: unknown resource type '${t}'`);
  return [...new Set(list)];
}

/** `cinder validate`: validates a tenant's stored resources against the R4 definitions and the profiles they claim. */
export const validateCommand: Command = {
  name: 'validate',
  summary: "Validate a tenant's stored resources against the R4 definitions and their profiles; report the invalid ones",
  usage:
    'cinder validate --tenant <id> [--type <type>]... [--json]\n\n' +
    'Checks every current resource of the tenant (or of the given types; repeated or comma-separated) as of now,\n' +
    'strictly (structure, formats, required bindings, invariants), whatever CINDER_VALIDATION says: for data\n' +
    'imported before validation existed or with CINDER_VALIDATION=structural|off. A resource claiming profiles\n' +
    "(meta.profile) is checked against each that Cinder knows (the tenant's StructureDefinitions as of the check, the\n" +
    'R4 core profiles), and its extensions against their definitions, as a write at strict is; a QuestionnaireResponse against\n' +
    'its Questionnaire. Prints one OperationOutcome per\n' +
    'invalid resource on stdout (NDJSON; each issue\'s diagnostics starts with Type/id) and a summary on stderr\n' +
    '(on stdout as JSON with --json, instead of the NDJSON). Exit code 1 when any resource is invalid.\n' +
    'A tenant that may hold unvalidated resources has each exported resource validated (an invalid one is listed in\n' +
    "the export's error file instead); a check of every type that finds nothing invalid ends that.",
  options: { tenant: { type: 'string' }, type: { type: 'string', multiple: true }, json: { type: 'boolean' } },
  async run(args, io) {
    const tenant = args.values.tenant;
    if (typeof tenant !== 'string') throw new UsageError('--tenant is required');
    const only = types(args.values.type);
    const json = !!args.values.json;
    const { store, clock } = await openContext(io);
    try {
      if (!(await store.tenants.get(tenant))) throw new UsageError(`tenant '${tenant}' does not exist`);
      // Read before the scan: a write below strict during it makes the clearing below fail, as it should.
      const debt = only ? null : await store.tenants.validationDebt(tenant);
      const total = await countStored(store, tenant, only);
      const progress = createProgress(io, total, undefined, WORDS);
      const invalid: { reference: string; versionId: number; errors: number }[] = [];
      let result: { checked: number; invalid: number };
      try {
        const at = clock.now();
        // The StructureDefinitions of the same snapshot, read once: no change token read per profiled resource.
        const stored = storeProfileValidator(store, clock);
        const membership = stored.membership;
        const valueSets = stored.registry.valueSets;
        const profiles = new ProfileValidator(new ProfileRegistry(snapshotProfiles(await readDefinitions(store, tenant, at)), valueSets ? { valueSets } : {}), membership);
        const questionnaires = new QuestionnaireValidator(snapshotQuestionnaires(await readQuestionnaires(store, tenant, at)), membership);
        result = await validateStored(store, tenant, {
          at,
          profiles,
          questionnaires,
          ...(only ? { types: only } : {}),
          onInvalid(r) {
            const reference = `${r.type}/${r.id}`;
            const issues = outcomeIssues(r.issues).map((i) => ({ ...i, diagnostics: `${reference}: ${i.diagnostics}` }));
            if (json) invalid.push({ reference, versionId: r.versionId, errors: r.issues.filter((i) => i.severity === 'error').length });
            else io.stdout(JSON.stringify({ resourceType: 'OperationOutcome', issue: issues }) + '\n');
          },
          onProgress: (checked, bad) => progress.update({ imported: checked, failed: bad, bytesRead: checked }),
        });
      } finally {
        progress.done();
      }
      const seconds = Math.round(progress.elapsedSeconds() * 10) / 10;
      // Every stored resource is valid: bulk exports of the tenant need not validate what they read.
      const cleared = debt !== null && result.invalid === 0 && (await store.tenants.clearValidationDebt(tenant, debt));
      if (json) printData(io, true, { tenant, checked: result.checked, invalid: result.invalid, seconds, resources: invalid, cleared });
      else {
        io.stderr(`Checked ${formatCount(result.checked)} resources of tenant '${tenant}' in ${seconds} s: ${formatCount(result.invalid)} invalid.\n`);
        if (cleared) io.stderr('Every resource is valid: bulk exports of this tenant no longer validate each resource.\n');
      }
      return result.invalid > 0 ? 1 : 0;
    } finally {
      await store.close();
    }
  },
};
