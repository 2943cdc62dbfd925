import type { Clock } from '../clock.ts';
import { fhirBaseOf, type Config } from '../config.ts';
import { CoreLayer } from '../fhir/core-layer.ts';
import type { FhirDeps } from '../fhir/crud.ts';
import { storeQuestionnaires } from '../fhir/validation/questionnaire/source.ts';
import { QuestionnaireValidator } from '../fhir/validation/questionnaire/validator.ts';
import type { Store } from '../store/types.ts';
import { CoreBundle } from '../terminology/core/core-bundle.ts';
import { storeProfileValidator } from '../validation-terminology.ts';

/**
 * The FHIR layer a command writes a tenant's resources through, as `serve` validates them (validation level, the
 * tenant's StructureDefinitions as stored now, the R4 core profiles, Questionnaires), without Subscription
 * notifications or referential integrity (`cinder import`, and the server's own status writes of `cinder user`).
 */
export function cliFhirDeps(config: Config, store: Store, clock: Clock, tenant: string): FhirDeps {
  const fhirBase = fhirBaseOf(config.baseUrl, tenant);
  const coreBundle = new CoreBundle();
  const profiles = storeProfileValidator(store, clock, coreBundle);
  const questionnaires = new QuestionnaireValidator(storeQuestionnaires(store), profiles.membership);
  return { store, clock, validation: config.validation, fhirBase: () => fhirBase, core: new CoreLayer(coreBundle), profiles, questionnaires };
}
