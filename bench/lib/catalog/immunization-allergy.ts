/** CVX vaccines by age, and SNOMED CT allergy substances and reactions. */

export interface VaccineDef {
  code: string;
  display: string;
  minAge: number;
  maxAge: number;
}

function vaccine(code: string, display: string, minAge: number, maxAge: number): VaccineDef {
  return { code, display, minAge, maxAge };
}

/** Seasonal influenza, offered at most adult and child visits. */
export const INFLUENZA = vaccine("140", "Influenza, seasonal, injectable, preservative free", 0.5, 120);

/** Routine schedule vaccines other than influenza (ages in years). */
export const VACCINES: readonly VaccineDef[] = [
  vaccine("08", "Hep B, adolescent or pediatric", 0, 1),
  vaccine("20", "DTaP", 0, 6),
  vaccine("10", "IPV", 0, 6),
  vaccine("49", "Hib (PRP-OMP)", 0, 2),
  vaccine("133", "Pneumococcal conjugate PCV 13", 0, 2),
  vaccine("03", "MMR", 1, 6),
  vaccine("21", "varicella", 1, 6),
  vaccine("83", "Hep A, ped/adol, 2 dose", 1, 3),
  vaccine("62", "HPV, quadrivalent", 9, 26),
  vaccine("115", "Tdap", 11, 120),
  vaccine("114", "meningococcal MCV4P", 11, 18),
  vaccine("113", "Td (adult) preservative free", 19, 120),
  vaccine("208", "SARS-COV-2 (COVID-19) vaccine, mRNA, spike protein, LNP, preservative free, 30 mcg/0.3mL dose", 12, 120),
  vaccine("187", "zoster vaccine recombinant", 50, 120),
  vaccine("33", "pneumococcal polysaccharide vaccine, 23 valent", 65, 120),
];

export type AllergyCategory = "food" | "medication" | "environment";

export interface AllergyDef {
  code: string;
  display: string;
  category: AllergyCategory;
  reactions: readonly { code: string; display: string }[];
}

const RASH = { code: "271807003", display: "Eruption of skin (disorder)" };
const HIVES = { code: "247472004", display: "Wheal (finding)" };
const ANAPHYLAXIS = { code: "39579001", display: "Anaphylaxis (disorder)" };
const DYSPNEA = { code: "267036007", display: "Dyspnea (finding)" };
const SNEEZING = { code: "76067001", display: "Sneezing (finding)" };
const COUGH = { code: "49727002", display: "Cough (finding)" };
const ITCHING = { code: "418290006", display: "Itching (finding)" };

export const ALLERGIES: readonly AllergyDef[] = [
  { code: "762952008", display: "Peanut (substance)", category: "food", reactions: [HIVES, ANAPHYLAXIS, DYSPNEA] },
  { code: "227493005", display: "Cashew nut (substance)", category: "food", reactions: [HIVES, ITCHING] },
  { code: "102263004", display: "Eggs (edible) (substance)", category: "food", reactions: [RASH, HIVES] },
  { code: "735029006", display: "Shellfish (substance)", category: "food", reactions: [HIVES, ANAPHYLAXIS] },
  { code: "256277009", display: "Grass pollen (substance)", category: "environment", reactions: [SNEEZING, COUGH, ITCHING] },
  { code: "260147004", display: "House dust mite (substance)", category: "environment", reactions: [SNEEZING, COUGH] },
  { code: "264287008", display: "Animal dander (substance)", category: "environment", reactions: [SNEEZING, ITCHING] },
  { code: "111088007", display: "Latex (substance)", category: "environment", reactions: [RASH, ITCHING] },
  { code: "764146007", display: "Penicillin (substance)", category: "medication", reactions: [RASH, HIVES, ANAPHYLAXIS] },
  { code: "387406002", display: "Sulfonamide (substance)", category: "medication", reactions: [RASH, ITCHING] },
];
