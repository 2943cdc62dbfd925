/** Name and place lists for synthetic people and organisations (invented combinations). */

export const MALE_NAMES = [
  "James", "John", "Robert", "Michael", "William", "David", "Richard", "Joseph", "Thomas", "Charles",
  "Daniel", "Matthew", "Anthony", "Mark", "Steven", "Paul", "Andrew", "Joshua", "Kenneth", "Kevin",
  "Brian", "George", "Timothy", "Ronald", "Jason", "Edward", "Jeffrey", "Ryan", "Jacob", "Gary",
  "Nicholas", "Eric", "Jonathan", "Stephen", "Larry", "Justin", "Scott", "Brandon", "Benjamin", "Samuel",
  "Luis", "Carlos", "Miguel", "Wei", "Hiroshi", "Ahmed", "Omar", "Ivan", "Mateo", "Elijah",
] as const;

export const FEMALE_NAMES = [
  "Mary", "Patricia", "Jennifer", "Linda", "Elizabeth", "Barbara", "Susan", "Jessica", "Sarah", "Karen",
  "Lisa", "Nancy", "Betty", "Margaret", "Sandra", "Ashley", "Kimberly", "Emily", "Donna", "Michelle",
  "Carol", "Amanda", "Dorothy", "Melissa", "Deborah", "Stephanie", "Rebecca", "Sharon", "Laura", "Cynthia",
  "Amy", "Kathleen", "Angela", "Shirley", "Anna", "Brenda", "Pamela", "Emma", "Nicole", "Helen",
  "Sofia", "Camila", "Valentina", "Mei", "Yuki", "Fatima", "Aisha", "Olga", "Isabella", "Olivia",
] as const;

export const FAMILY_NAMES = [
  "Smith", "Johnson", "Williams", "Brown", "Jones", "Garcia", "Miller", "Davis", "Rodriguez", "Martinez",
  "Hernandez", "Lopez", "Gonzalez", "Wilson", "Anderson", "Thomas", "Taylor", "Moore", "Jackson", "Martin",
  "Lee", "Perez", "Thompson", "White", "Harris", "Sanchez", "Clark", "Ramirez", "Lewis", "Robinson",
  "Walker", "Young", "Allen", "King", "Wright", "Scott", "Torres", "Nguyen", "Hill", "Flores",
  "Green", "Adams", "Nelson", "Baker", "Hall", "Rivera", "Campbell", "Mitchell", "Carter", "Roberts",
  "Kim", "Chen", "Patel", "Schmidt", "Kowalski", "Novak", "O'Brien", "Murphy", "Cohen", "Tanaka",
] as const;

export const STREET_NAMES = [
  "Maple", "Oak", "Cedar", "Pine", "Elm", "Washington", "Lake", "Hill", "Park", "Main",
  "Church", "Walnut", "Spring", "Highland", "Sunset", "River", "Meadow", "Forest", "Ridge", "Mill",
] as const;

export const STREET_SUFFIXES = ["Street", "Avenue", "Road", "Lane", "Drive", "Court", "Way", "Boulevard"] as const;

export interface City {
  name: string;
  state: string;
  zip: string;
  /** UTC offset in hours (standard time), used for the timestamps of people living there. */
  offset: number;
}

export const CITIES: readonly City[] = [
  { name: "Boston", state: "MA", zip: "021", offset: -5 },
  { name: "Worcester", state: "MA", zip: "016", offset: -5 },
  { name: "Springfield", state: "MA", zip: "011", offset: -5 },
  { name: "Providence", state: "RI", zip: "029", offset: -5 },
  { name: "Hartford", state: "CT", zip: "061", offset: -5 },
  { name: "Albany", state: "NY", zip: "122", offset: -5 },
  { name: "Philadelphia", state: "PA", zip: "191", offset: -5 },
  { name: "Baltimore", state: "MD", zip: "212", offset: -5 },
  { name: "Atlanta", state: "GA", zip: "303", offset: -5 },
  { name: "Columbus", state: "OH", zip: "432", offset: -5 },
  { name: "Chicago", state: "IL", zip: "606", offset: -6 },
  { name: "Madison", state: "WI", zip: "537", offset: -6 },
  { name: "Minneapolis", state: "MN", zip: "554", offset: -6 },
  { name: "Austin", state: "TX", zip: "787", offset: -6 },
  { name: "Denver", state: "CO", zip: "802", offset: -7 },
  { name: "Phoenix", state: "AZ", zip: "850", offset: -7 },
  { name: "Salt Lake City", state: "UT", zip: "841", offset: -7 },
  { name: "Seattle", state: "WA", zip: "981", offset: -8 },
  { name: "Portland", state: "OR", zip: "972", offset: -8 },
  { name: "Sacramento", state: "CA", zip: "958", offset: -8 },
];

export const ORGANIZATION_KINDS = [
  "General Hospital",
  "Medical Center",
  "Family Practice",
  "Community Health Center",
  "Primary Care Associates",
  "Internal Medicine Group",
] as const;

/** OMB race categories (urn:oid:2.16.840.1.113883.6.238) with population weights. */
export const RACES = [
  { code: "2106-3", display: "White", weight: 60 },
  { code: "2054-5", display: "Black or African American", weight: 13 },
  { code: "2028-9", display: "Asian", weight: 6 },
  { code: "1002-5", display: "American Indian or Alaska Native", weight: 1 },
  { code: "2131-1", display: "Other Race", weight: 5 },
] as const;
