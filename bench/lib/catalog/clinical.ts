/** SNOMED CT conditions and procedures, RxNorm medications, and how they go together. */

export interface MedicationDef {
  code: string;
  display: string;
  /** Dosage: `doses` of `doseValue` `doseUnit` every `period` `periodUnit`. */
  doseValue: number;
  doseUnit: string;
  doses: number;
  period: number;
  periodUnit: "h" | "d";
  asNeeded: boolean;
}

export interface ProcedureDef {
  code: string;
  display: string;
  minutes: number;
}

export interface ConditionDef {
  code: string;
  display: string;
  /** Chronic conditions stay active; acute ones resolve after `days`. */
  chronic: boolean;
  minAge: number;
  maxAge: number;
  /** Chronic: probability a patient in the age range has it; acute: relative frequency. */
  weight: number;
  days: [number, number];
  medications: readonly MedicationDef[];
  procedures: readonly ProcedureDef[];
}

function med(code: string, display: string, dose: [number, string, number, number, "h" | "d", boolean]): MedicationDef {
  const [doseValue, doseUnit, doses, period, periodUnit, asNeeded] = dose;
  return { code, display, doseValue, doseUnit, doses, period, periodUnit, asNeeded };
}

export const MEDS = {
  lisinopril: med("314076", "lisinopril 10 MG Oral Tablet", [1, "{tbl}", 1, 1, "d", false]),
  amlodipine: med("197361", "amlodipine 5 MG Oral Tablet", [1, "{tbl}", 1, 1, "d", false]),
  hydrochlorothiazide: med("310798", "hydrochlorothiazide 25 MG Oral Tablet", [1, "{tbl}", 1, 1, "d", false]),
  metformin: med("860975", "24 HR metformin hydrochloride 500 MG Extended Release Oral Tablet", [1, "{tbl}", 2, 1, "d", false]),
  simvastatin: med("312961", "simvastatin 20 MG Oral Tablet", [1, "{tbl}", 1, 1, "d", false]),
  fluticasone: med("895994", "120 ACTUAT fluticasone propionate 0.044 MG/ACTUAT Metered Dose Inhaler", [2, "{actuat}", 2, 1, "d", false]),
  albuterol: med("745679", "200 ACTUAT albuterol 0.09 MG/ACTUAT Metered Dose Inhaler", [2, "{actuat}", 1, 4, "h", true]),
  amoxicillin: med("308182", "amoxicillin 250 MG Oral Capsule", [1, "{cap}", 3, 1, "d", false]),
  amoxiClav: med("562251", "amoxicillin 250 MG / clavulanate 125 MG Oral Tablet", [1, "{tbl}", 2, 1, "d", false]),
  penicillinV: med("834061", "penicillin V potassium 250 MG Oral Tablet", [1, "{tbl}", 4, 1, "d", false]),
  acetaminophen: med("313782", "acetaminophen 325 MG Oral Tablet", [2, "{tbl}", 1, 6, "h", true]),
  ibuprofen: med("310965", "ibuprofen 200 MG Oral Tablet", [2, "{tbl}", 1, 6, "h", true]),
  naproxen: med("849574", "naproxen sodium 220 MG Oral Tablet", [1, "{tbl}", 1, 12, "h", true]),
  oxycodoneApap: med("1049221", "acetaminophen 325 MG / oxycodone hydrochloride 5 MG Oral Tablet", [1, "{tbl}", 1, 6, "h", true]),
  aspirin: med("243670", "aspirin 81 MG Oral Tablet", [1, "{tbl}", 1, 1, "d", false]),
  clopidogrel: med("309362", "clopidogrel 75 MG Oral Tablet", [1, "{tbl}", 1, 1, "d", false]),
  metoprolol: med("866412", "24 HR metoprolol succinate 100 MG Extended Release Oral Tablet", [1, "{tbl}", 1, 1, "d", false]),
} as const;

export const PROCEDURES = {
  assessment: { code: "710824005", display: "Assessment of health and social care needs (procedure)", minutes: 15 },
  depressionScreening: { code: "171207006", display: "Depression screening (procedure)", minutes: 15 },
  medicationReconciliation: { code: "430193006", display: "Medication reconciliation (procedure)", minutes: 15 },
  colonoscopy: { code: "73761001", display: "Colonoscopy (procedure)", minutes: 45 },
  mammography: { code: "71651007", display: "Mammography (procedure)", minutes: 30 },
  throatCulture: { code: "117015009", display: "Throat culture (procedure)", minutes: 10 },
  chestXray: { code: "399208008", display: "Plain chest X-ray (procedure)", minutes: 20 },
  respiratoryFunction: { code: "23426006", display: "Measurement of respiratory function (procedure)", minutes: 20 },
  suture: { code: "288086009", display: "Suture open wound (procedure)", minutes: 30 },
  appendectomy: { code: "80146002", display: "Appendectomy (procedure)", minutes: 90 },
  electrocardiogram: { code: "268400002", display: "12 lead electrocardiogram (procedure)", minutes: 15 },
  immobilization: { code: "274474001", display: "Bone immobilization (procedure)", minutes: 40 },
} as const satisfies Record<string, ProcedureDef>;

const M = MEDS;
const P = PROCEDURES;

function condition(code: string, display: string, rest: Omit<ConditionDef, "code" | "display">): ConditionDef {
  return { code, display, ...rest };
}

export const CHRONIC_CONDITIONS: readonly ConditionDef[] = [
  condition("59621000", "Essential hypertension (disorder)", {
    chronic: true, minAge: 25, maxAge: 120, weight: 0.3, days: [0, 0],
    medications: [M.lisinopril, M.amlodipine, M.hydrochlorothiazide], procedures: [P.electrocardiogram],
  }),
  condition("44054006", "Diabetes mellitus type 2 (disorder)", {
    chronic: true, minAge: 30, maxAge: 120, weight: 0.11, days: [0, 0],
    medications: [M.metformin], procedures: [],
  }),
  condition("55822004", "Hyperlipidemia (disorder)", {
    chronic: true, minAge: 30, maxAge: 120, weight: 0.2, days: [0, 0],
    medications: [M.simvastatin], procedures: [],
  }),
  condition("195967001", "Asthma (disorder)", {
    chronic: true, minAge: 3, maxAge: 120, weight: 0.08, days: [0, 0],
    medications: [M.fluticasone, M.albuterol], procedures: [P.respiratoryFunction],
  }),
  condition("53741008", "Coronary arteriosclerosis (disorder)", {
    chronic: true, minAge: 45, maxAge: 120, weight: 0.07, days: [0, 0],
    medications: [M.aspirin, M.clopidogrel, M.metoprolol], procedures: [P.electrocardiogram],
  }),
  condition("239873007", "Osteoarthritis of knee (disorder)", {
    chronic: true, minAge: 40, maxAge: 120, weight: 0.1, days: [0, 0],
    medications: [M.naproxen], procedures: [],
  }),
  condition("162864005", "Body mass index 30+ - obesity (finding)", {
    chronic: true, minAge: 18, maxAge: 120, weight: 0.15, days: [0, 0], medications: [], procedures: [],
  }),
];

export const ACUTE_CONDITIONS: readonly ConditionDef[] = [
  condition("444814009", "Viral sinusitis (disorder)", {
    chronic: false, minAge: 0, maxAge: 120, weight: 25, days: [7, 21], medications: [M.amoxiClav], procedures: [],
  }),
  condition("195662009", "Acute viral pharyngitis (disorder)", {
    chronic: false, minAge: 0, maxAge: 120, weight: 18, days: [5, 14], medications: [M.acetaminophen], procedures: [P.throatCulture],
  }),
  condition("10509002", "Acute bronchitis (disorder)", {
    chronic: false, minAge: 0, maxAge: 120, weight: 15, days: [10, 28], medications: [M.acetaminophen], procedures: [P.chestXray],
  }),
  condition("43878008", "Streptococcal sore throat (disorder)", {
    chronic: false, minAge: 3, maxAge: 60, weight: 8, days: [7, 14], medications: [M.penicillinV], procedures: [P.throatCulture],
  }),
  condition("65363002", "Otitis media (disorder)", {
    chronic: false, minAge: 0, maxAge: 12, weight: 20, days: [7, 21], medications: [M.amoxicillin, M.ibuprofen], procedures: [],
  }),
  condition("38822007", "Cystitis (disorder)", {
    chronic: false, minAge: 16, maxAge: 120, weight: 6, days: [5, 10], medications: [M.amoxiClav], procedures: [],
  }),
];

export const INJURIES: readonly ConditionDef[] = [
  condition("44465007", "Sprain of ankle (disorder)", {
    chronic: false, minAge: 5, maxAge: 120, weight: 10, days: [14, 42], medications: [M.ibuprofen], procedures: [],
  }),
  condition("283371005", "Laceration of forearm (disorder)", {
    chronic: false, minAge: 3, maxAge: 120, weight: 6, days: [10, 21], medications: [M.acetaminophen], procedures: [P.suture],
  }),
  condition("16114001", "Fracture of ankle (disorder)", {
    chronic: false, minAge: 5, maxAge: 120, weight: 3, days: [42, 90], medications: [M.oxycodoneApap], procedures: [P.immobilization],
  }),
  condition("62106007", "Concussion with no loss of consciousness (disorder)", {
    chronic: false, minAge: 5, maxAge: 120, weight: 3, days: [14, 42], medications: [M.acetaminophen], procedures: [],
  }),
];

export const APPENDICITIS: ConditionDef = condition("74400008", "Appendicitis (disorder)", {
  chronic: false, minAge: 5, maxAge: 120, weight: 1, days: [14, 28], medications: [M.oxycodoneApap], procedures: [P.appendectomy],
});
