//! Runs the built `strata` binary's table subcommands against temporary directories,
//! comparing what it prints with a model of the rows kept by the test.

mod common;

use std::path::Path;
use std::process::Command;

use common::{assert_all_fail, assert_fails, new_db, ok, path_str, run};

use serde_json::{Value as J, json};

const PEOPLE: &str = "table people (id u64, name str, city str null, age i64, score f64, active bool, \
                      tag bytes null) primary key (id) index by_city (city, age) deferred";

/// One row of `people`, as the test's model holds it.
#[derive(Clone, Debug, PartialEq)]
struct Person {
    id: u64,
    name: String,
    city: Option<String>,
    age: i64,
    score: f64,
    active: bool,
    tag: Option<Vec<u8>>,
}

const CITIES: [Option<&str>; 6] = [
    None,
    Some("Paris"),
    Some("Zürich"),
    Some("New York, NY"),
    Some("\"Quoted\" City"),
    Some("berlin"),
];

/// The `i`th generated person: ids are 1, 4, 7, ...; names hold commas and quotes;
/// cities and tags are sometimes NULL; ages and scores are sometimes negative.
fn person(i: u64) -> Person {
    Person {
        id: i * 3 + 1,
        name: format!("name {i}, \"n{}\" é", i % 7),
        city: CITIES[(i * 7 % 6) as usize].map(str::to_string),
        age: (i as i64 * 37 % 120) - 40,
        score: ((i * 13 % 80) as f64 - 40.0) / 4.0,
        active: i.is_multiple_of(3),
        tag: (!i.is_multiple_of(4)).then(|| vec![i as u8, (i >> 8) as u8, 0xff]),
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

impl Person {
    /// The JSON object the CLI prints for this row.
    fn json(&self) -> J {
        json!({
            "id": self.id,
            "name": self.name,
            "city": self.city,
            "age": self.age,
            "score": self.score,
            "active": self.active,
            "tag": self.tag.as_deref().map(hex),
        })
    }

    /// The index key order of `by_city`: (city, age), then the primary key.
    fn by_city_key(&self) -> (Option<String>, i64, u64) {
        (self.city.clone(), self.age, self.id)
    }
}

fn csv_quote(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

/// A CSV file of `people` (columns in a different order than the schema; NULLs as
/// empty cells, sometimes `\N`; booleans spelled several ways).
fn people_csv(people: &[Person]) -> String {
    let mut s = String::from("name,id,age,city,score,active,tag\n");
    for (n, p) in people.iter().enumerate() {
        let city = match &p.city {
            Some(c) => csv_quote(c),
            None if n % 2 == 0 => String::new(),
            None => "\\N".to_string(),
        };
        let active = match (p.active, n % 2) {
            (true, 0) => "true",
            (true, _) => "1",
            (false, 0) => "false",
            (false, _) => "0",
        };
        let tag = p.tag.as_deref().map(hex).unwrap_or_default();
        s.push_str(&format!(
            "{},{},{},{},{},{},{}\n",
            csv_quote(&p.name),
            p.id,
            p.age,
            city,
            p.score,
            active,
            tag
        ));
    }
    s
}

/// A JSON Lines file of `people` (NULL fields sometimes left out, sometimes `null`).
fn people_jsonl(people: &[Person]) -> String {
    let mut s = String::new();
    for (n, p) in people.iter().enumerate() {
        let mut j = p.json();
        if n % 2 == 0 {
            let obj = j.as_object_mut().unwrap();
            obj.retain(|_, v| !v.is_null());
        }
        s.push_str(&j.to_string());
        s.push('\n');
        if n % 10 == 0 {
            s.push('\n'); // blank lines are skipped
        }
    }
    s
}

/// Parses JSON Lines output.
fn jsonl(out: &str) -> Vec<J> {
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
        .collect()
}

fn jsons(people: &[&Person]) -> Vec<J> {
    people.iter().map(|p| p.json()).collect()
}

/// A database with `people` holding 300 rows from a CSV file and 60 from a JSON Lines
/// file; returns the model sorted by id.
fn loaded_people(dir: &Path, db: &Path) -> Vec<Person> {
    ok(db, &["create-table", PEOPLE]);
    let csv_rows: Vec<Person> = (0..300).map(person).collect();
    let csv = dir.join("people.csv");
    std::fs::write(&csv, people_csv(&csv_rows)).unwrap();
    let out = ok(db, &["load", "people", path_str(&csv), "--batch", "64"]);
    assert_eq!(out, "loaded 300 rows into table people\n");

    let json_rows: Vec<Person> = (300..360).map(person).collect();
    let jl = dir.join("people.jsonl");
    std::fs::write(&jl, people_jsonl(&json_rows)).unwrap();
    let out = ok(db, &["load", "people", path_str(&jl)]);
    assert_eq!(out, "loaded 60 rows into table people\n");

    let mut all = csv_rows;
    all.extend(json_rows);
    all.sort_by_key(|p| p.id);
    all
}

/// The people of `ordered` who live in `city`, in the same order.
fn in_city<'a>(ordered: &[&'a Person], city: &str) -> Vec<&'a Person> {
    ordered
        .iter()
        .copied()
        .filter(|p| p.city.as_deref() == Some(city))
        .collect()
}

fn by_city_order(model: &[Person]) -> Vec<&Person> {
    let mut v: Vec<&Person> = model.iter().collect();
    v.sort_by_key(|p| p.by_city_key());
    v
}

#[test]
fn create_table_lists_and_drops_tables() {
    let (dir, db) = new_db();
    ok(&db, &["create-table", PEOPLE]);
    assert_eq!(ok(&db, &["tables"]), "people\n");
    let schema_file = dir.path().join("events.txt");
    std::fs::write(
        &schema_file,
        "table events (user u64, ts i64, kind str, payload bytes null)\n  primary key (user, ts)\n  eager\n",
    )
    .unwrap();
    ok(&db, &["create-table", "--file", path_str(&schema_file)]);
    assert_eq!(ok(&db, &["tables"]), "events\npeople\n");
    // --schema prints each schema in its canonical one-line form.
    let canonical_people = PEOPLE.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(
        ok(&db, &["tables", "--schema"]),
        format!(
            "table events (user u64, ts i64, kind str, payload bytes null) primary key (user, ts) eager\n{canonical_people}\n"
        )
    );
    assert_fails(&run(&db, &["create-table", PEOPLE]), 1, &["already exists", "people"]);
    ok(&db, &["drop-table", "events"]);
    assert_eq!(ok(&db, &["tables"]), "people\n");
    assert_fails(&run(&db, &["drop-table", "events"]), 1, &["table \"events\" not found"]);
}

#[test]
fn load_csv_and_jsonl_then_row_get_and_select_all() {
    let (dir, db) = new_db();
    let model = loaded_people(dir.path(), &db);
    assert_eq!(model.len(), 360);

    let out = ok(&db, &["select", "people"]);
    assert!(out.starts_with("{\"id\":1,\"name\":"), "fields in schema order:\n{out}");
    assert_eq!(jsonl(&out), jsons(&model.iter().collect::<Vec<_>>()));
    assert_eq!(ok(&db, &["select", "people", "--count"]), "360\n");

    for p in model.iter().step_by(23) {
        let out = ok(&db, &["row-get", "people", &p.id.to_string()]);
        assert_eq!(jsonl(&out), vec![p.json()], "row {}", p.id);
    }
    // TSV: a header, then NULL as \N, bytes as hex, floats with a decimal point.
    let p = person(4); // tag NULL, city Some
    let out = ok(&db, &["row-get", "people", &p.id.to_string(), "--format", "tsv"]);
    assert_eq!(
        out,
        format!(
            "id\tname\tcity\tage\tscore\tactive\ttag\n{}\t{}\t{}\t{}\t{:?}\t{}\t\\N\n",
            p.id,
            p.name,
            p.city.as_deref().unwrap(),
            p.age,
            p.score,
            p.active
        )
    );
    let r = run(&db, &["row-get", "people", "2"]);
    assert_fails(&r, 1, &["not found", "people"]);
    assert!(r.stdout.is_empty());
}

#[test]
fn select_eq_range_reverse_limit_and_count() {
    let (dir, db) = new_db();
    let model = loaded_people(dir.path(), &db);
    let ordered = by_city_order(&model);

    // Equality on the first index field.
    let paris = in_city(&ordered, "Paris");
    assert!(paris.len() > 10);
    let out = ok(&db, &["select", "people", "--index", "by_city", "--eq", "Paris"]);
    assert_eq!(jsonl(&out), jsons(&paris));
    assert_eq!(
        ok(
            &db,
            &["select", "people", "--index", "by_city", "--eq", "Paris", "--count"]
        ),
        format!("{}\n", paris.len())
    );
    // NULL is a value of a nullable index field, and sorts first.
    let nulls: Vec<&Person> = ordered.iter().copied().filter(|p| p.city.is_none()).collect();
    let out = ok(&db, &["select", "people", "--index", "by_city", "--eq", "null"]);
    assert_eq!(jsonl(&out), jsons(&nulls));
    let out = ok(&db, &["select", "people", "--index", "by_city", "--limit", "3"]);
    assert_eq!(jsonl(&out), jsons(&nulls[..3]));

    // Equality then a range on the next field, with bounds that are ages of rows (one
    // of them negative): --from inclusive, --to exclusive by default.
    let (lo, hi) = (paris[2].age, paris[paris.len() - 3].age);
    assert!(lo < 0 && lo < hi, "{lo} {hi}");
    let (lo_s, hi_s) = (lo.to_string(), hi.to_string());
    let range = |lo_incl: bool, hi_incl: bool| -> Vec<&Person> {
        paris
            .iter()
            .copied()
            .filter(|p| (p.age > lo || (lo_incl && p.age == lo)) && (p.age < hi || (hi_incl && p.age == hi)))
            .collect()
    };
    let args = [
        "select", "people", "--index", "by_city", "--eq", "Paris", "--from", &lo_s, "--to", &hi_s,
    ];
    assert_eq!(jsonl(&ok(&db, &args)), jsons(&range(true, false)));
    // --from-exclusive / --to-inclusive.
    assert_ne!(range(true, false), range(false, true));
    let mut args2 = args.to_vec();
    args2.push("--from-exclusive");
    assert_eq!(jsonl(&ok(&db, &args2)), jsons(&range(false, false)));
    args2.push("--to-inclusive");
    assert_eq!(jsonl(&ok(&db, &args2)), jsons(&range(false, true)));
    // Reverse with a limit: the last rows of the range, descending.
    let mut args3 = args.to_vec();
    args3.extend(["--reverse", "--limit", "4"]);
    let want: Vec<&Person> = range(true, false).into_iter().rev().take(4).collect();
    assert_eq!(want.len(), 4);
    assert_eq!(jsonl(&ok(&db, &args3)), jsons(&want));

    // A range on the first field (strings in byte order: "Zürich" < "a" < "berlin").
    let want: Vec<&Person> = ordered
        .iter()
        .copied()
        .filter(|p| p.city.as_deref().is_some_and(|c| ("New".."a").contains(&c)))
        .collect();
    let out = ok(
        &db,
        &["select", "people", "--index", "by_city", "--from", "New", "--to", "a"],
    );
    assert_eq!(jsonl(&out), jsons(&want));
    assert!(want.iter().any(|p| p.city.as_deref() == Some("Zürich")));

    // Through the primary index.
    let want: Vec<&Person> = model.iter().filter(|p| (100..=200).contains(&p.id)).collect();
    let out = ok(
        &db,
        &["select", "people", "--from", "100", "--to", "200", "--to-inclusive"],
    );
    assert_eq!(jsonl(&out), jsons(&want));
    let out = ok(&db, &["select", "people", "--reverse", "--limit", "2"]);
    assert_eq!(jsonl(&out), jsons(&[&model[359], &model[358]]));
    let out = ok(&db, &["select", "people", "--eq", "4"]);
    assert_eq!(jsonl(&out), jsons(&[&model[1]]));
    assert_eq!(
        ok(&db, &["select", "people", "--from", "7", "--count", "--limit", "5"]),
        "5\n"
    );
    assert_eq!(ok(&db, &["select", "people", "--from", "2000"]), "");

    // TSV output: a header line, then one line per row.
    let out = ok(&db, &["select", "people", "--limit", "2", "--format", "tsv"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert_eq!(lines[0], "id\tname\tcity\tage\tscore\tactive\ttag");
    assert!(lines[1].starts_with("1\tname 0, \"n0\" é\t\\N\t-40\t"), "{out}");
}

#[test]
fn composite_keys_and_eager_tables() {
    let (_t, db) = new_db();
    ok(
        &db,
        &[
            "create-table",
            "table events (user u64, ts i64, kind str, ok bool null) primary key (user, ts) \
           index by_kind (kind) eager",
        ],
    );
    let mut model = Vec::new();
    for user in 1..=4u64 {
        for ts in -5..5i64 {
            let kind = ["click", "view", "buy"][(user as i64 + ts).rem_euclid(3) as usize];
            let row = json!({"user": user, "ts": ts, "kind": kind, "ok": (ts % 2 == 0).then_some(ts > 0)});
            ok(&db, &["insert", "events", &row.to_string()]);
            model.push(row);
        }
    }
    // Equality on the first key field, range on the second.
    let want: Vec<J> = model
        .iter()
        .filter(|r| r["user"] == 3 && (-2..=3).contains(&r["ts"].as_i64().unwrap()))
        .cloned()
        .collect();
    let out = ok(
        &db,
        &[
            "select",
            "events",
            "--eq",
            "3",
            "--from",
            "-2",
            "--to",
            "3",
            "--to-inclusive",
        ],
    );
    assert_eq!(jsonl(&out), want);
    let out = ok(&db, &["row-get", "events", "2", "-4"]);
    assert_eq!(jsonl(&out), vec![model[10 + 1].clone()]);
    ok(&db, &["row-delete", "events", "2", "-4"]);
    assert_fails(&run(&db, &["row-get", "events", "2", "-4"]), 1, &["not found"]);
    let n_buy = model.iter().filter(|r| r["kind"] == "buy").count() - usize::from(model[11]["kind"] == "buy");
    assert_eq!(
        ok(
            &db,
            &["select", "events", "--index", "by_kind", "--eq", "buy", "--count"]
        ),
        format!("{n_buy}\n")
    );
    // Both pk values are needed, by type.
    assert_all_fail(
        &db,
        &[
            (
                &["row-get", "events", "2"],
                2,
                &["primary key of 2 fields (user, ts), 1 value given"],
            ),
            (
                &["row-get", "events", "2", "x"],
                2,
                &["field 'ts' expects i64, got \"x\""],
            ),
            (&["row-get", "events", "-2", "1"], 2, &["field 'user' expects u64"]),
        ],
    );
    let out = ok(&db, &["check"]);
    assert!(out.starts_with("table events: 39 rows\n"), "{out}");
    assert!(out.ends_with("ok\n"), "{out}");
}

#[test]
fn update_replace_and_delete_are_reflected_in_selects() {
    let (dir, db) = new_db();
    let mut model = loaded_people(dir.path(), &db);

    // update: change the indexed city and age of one row, clear the tag of another.
    let a = model[10].id;
    ok(
        &db,
        &[
            "update",
            "people",
            &a.to_string(),
            "--set",
            "city=Oslo",
            "--set",
            "age=-77",
        ],
    );
    model[10].city = Some("Oslo".into());
    model[10].age = -77;
    let b = model[11].id;
    ok(
        &db,
        &[
            "update",
            "people",
            &b.to_string(),
            "--set",
            "tag=null",
            "--set",
            "active=true",
        ],
    );
    model[11].tag = None;
    model[11].active = true;
    assert_fails(
        &run(&db, &["update", "people", "2", "--set", "age=1"]),
        1,
        &["row (2) not found in table \"people\""],
    );

    // replace: an existing row (moving it to another city) and a new one.
    let c = model[20].clone();
    let moved = Person {
        city: Some("Oslo".into()),
        age: 5,
        name: "replaced, \"yes\"".into(),
        ..c
    };
    ok(&db, &["replace", "people", &moved.json().to_string()]);
    model[20] = moved;
    let new = Person {
        id: 2,
        name: "two".into(),
        city: Some("Oslo".into()),
        age: 0,
        score: f64::MAX,
        active: false,
        tag: Some(vec![]),
    };
    ok(&db, &["replace", "people", &new.json().to_string()]);
    model.insert(1, new.clone());
    // insert of an existing key fails and changes nothing.
    let dup = Person {
        name: "dup".into(),
        ..new.clone()
    };
    assert_fails(
        &run(&db, &["insert", "people", &dup.json().to_string()]),
        1,
        &["duplicate primary key (2)"],
    );

    // row-delete of two rows (one of them in Paris), and of one that is absent.
    let paris_victim = model.iter().position(|p| p.city.as_deref() == Some("Paris")).unwrap();
    for i in [paris_victim, 30] {
        let id = model[i].id.to_string();
        ok(&db, &["row-delete", "people", &id]);
        assert_fails(&run(&db, &["row-get", "people", &id]), 1, &["not found"]);
    }
    let (i1, i2) = (paris_victim.min(30), paris_victim.max(30));
    model.remove(i2);
    model.remove(i1);
    ok(&db, &["row-delete", "people", "999999"]);

    let ordered = by_city_order(&model);
    let oslo = in_city(&ordered, "Oslo");
    assert_eq!(oslo.len(), 3);
    assert_eq!(oslo[0].age, -77, "ordered by age within the city");
    let out = ok(&db, &["select", "people", "--index", "by_city", "--eq", "Oslo"]);
    assert_eq!(jsonl(&out), jsons(&oslo));
    let paris = in_city(&ordered, "Paris");
    let out = ok(&db, &["select", "people", "--index", "by_city", "--eq", "Paris"]);
    assert_eq!(jsonl(&out), jsons(&paris));
    assert_eq!(
        jsonl(&ok(&db, &["select", "people", "--index", "by_city"])),
        jsons(&ordered)
    );
    assert_eq!(
        jsonl(&ok(&db, &["select", "people"])),
        jsons(&model.iter().collect::<Vec<_>>())
    );

    // The stale deferred index entries are skipped, counted, and removed by compaction.
    let out = ok(&db, &["check"]);
    assert!(out.ends_with("ok\n"), "{out}");
    let out = ok(&db, &["check", "--compact"]);
    assert!(
        out.starts_with(&format!("table people: {} rows\n", model.len())),
        "{out}"
    );
    assert!(out.ends_with("ok\n"), "{out}");
    assert_eq!(
        jsonl(&ok(&db, &["select", "people", "--index", "by_city"])),
        jsons(&ordered)
    );
}

#[test]
fn create_index_on_a_loaded_table_then_select_through_it() {
    let (dir, db) = new_db();
    let model = loaded_people(dir.path(), &db);
    ok(&db, &["create-index", "people", "by_score", "score,id"]);
    ok(&db, &["create-index", "people", "by_name", "name", "--unique"]);
    let out = ok(&db, &["tables", "--schema"]);
    assert!(
        out.contains(" index by_score (score, id) index by_name unique (name) deferred"),
        "{out}"
    );

    let mut by_score: Vec<&Person> = model.iter().collect();
    by_score.sort_by(|a, b| a.score.total_cmp(&b.score).then(a.id.cmp(&b.id)));
    let out = ok(&db, &["select", "people", "--index", "by_score"]);
    assert_eq!(jsonl(&out), jsons(&by_score));
    let want: Vec<&Person> = by_score.iter().copied().filter(|p| p.score < -5.5).collect();
    assert!(!want.is_empty());
    let out = ok(&db, &["select", "people", "--index", "by_score", "--to", "-5.5"]);
    assert_eq!(jsonl(&out), jsons(&want));
    let want: Vec<&Person> = by_score.iter().copied().filter(|p| p.score == 2.5).rev().collect();
    let out = ok(
        &db,
        &["select", "people", "--index", "by_score", "--eq", "2.5", "--reverse"],
    );
    assert_eq!(jsonl(&out), jsons(&want));

    let p = &model[77];
    let out = ok(&db, &["select", "people", "--index", "by_name", "--eq", &p.name]);
    assert_eq!(jsonl(&out), vec![p.json()]);
    // The unique index refuses a second row with that name.
    let dup = Person { id: 5, ..p.clone() };
    assert_fails(
        &run(&db, &["insert", "people", &dup.json().to_string()]),
        1,
        &["unique index \"by_name\""],
    );
    let out = ok(&db, &["check", "--compact"]);
    assert!(
        out.contains("  index by_name: 360 entries (360 valid, 0 dirty), 0 missing, 360 in files\n"),
        "{out}"
    );
    assert!(out.ends_with("ok\n"), "{out}");

    // A duplicate index name, an unknown field, and a dropped index.
    assert_all_fail(
        &db,
        &[
            (&["create-index", "people", "by_name", "age"], 1, &["already exists"]),
            (&["create-index", "people", "by_zz", "age,zz"], 1, &["no field \"zz\""]),
        ],
    );
    ok(&db, &["drop-index", "people", "by_score"]);
    assert_fails(
        &run(&db, &["select", "people", "--index", "by_score"]),
        1,
        &[
            "index \"by_score\" not found in table \"people\"",
            "primary, by_city, by_name",
        ],
    );
    assert_eq!(
        jsonl(&ok(&db, &["select", "people", "--index", "by_name", "--limit", "1"])),
        vec![model[0].json()],
        "\"name 0, ...\" sorts first"
    );
}

#[test]
fn table_stats_show_counters_and_index_sizes() {
    let (dir, db) = new_db();
    let model = loaded_people(dir.path(), &db);
    ok(&db, &["check", "--compact"]);
    let n = model.len();
    let text = ok(&db, &["table-stats", "people"]);
    assert!(text.starts_with("table people (deferred maintenance)\n"), "{text}");
    for counter in ["statements", "hidden reads", "unique-check reads", "primary lookups"] {
        assert!(text.contains(&format!("\n  {counter:<22}")), "{counter}:\n{text}");
    }
    assert!(text.contains(&format!("  primary entries       {n}\n")), "{text}");
    assert!(text.contains(&format!("  index by_city: {n} entries, ")), "{text}");

    let j: J = serde_json::from_str(&ok(&db, &["table-stats", "people", "--json"])).unwrap();
    assert_eq!(j["name"], "people");
    assert_eq!(j["mode"], "deferred");
    assert_eq!(j["primary_entries"], n);
    for counter in [
        "statements",
        "hidden_reads",
        "unique_check_reads",
        "update_reads",
        "primary_lookups",
    ] {
        assert!(j[counter].is_u64(), "{counter}: {j}");
    }
    assert_eq!(j["indexes"][0]["name"], "by_city");
    assert_eq!(j["indexes"][0]["unique"], false);
    assert_eq!(j["indexes"][0]["entries"], n);
    assert!(j["indexes"][0]["bytes"].as_u64().unwrap() > 0);
    assert_eq!(j["indexes"].as_array().unwrap().len(), 1);

    // After more rows the on-disk counts grow (before compaction, overwritten versions
    // count too).
    let extra = Person {
        id: 2,
        ..model[0].clone()
    };
    ok(&db, &["insert", "people", &extra.json().to_string()]);
    ok(&db, &["check", "--compact"]);
    let j: J = serde_json::from_str(&ok(&db, &["table-stats", "people", "--json"])).unwrap();
    assert_eq!(j["primary_entries"], n + 1);
    assert_fails(&run(&db, &["table-stats", "nope"]), 1, &["table \"nope\" not found"]);
}

#[test]
fn bad_schema_text_names_the_token() {
    let (dir, db) = new_db();
    let r = run(&db, &["create-table", "table t (a u32) primary key (a)"]);
    assert_fails(&r, 2, &["invalid schema", "position 12", "found 'u32'"]);
    let r = run(&db, &["create-table", "table t (a u64, b str) primary key (c)"]);
    assert_fails(&r, 2, &["primary key field 'c'"]);
    let r = run(
        &db,
        &["create-table", "table t (a u64) primary key (a) index ix (a) sometimes"],
    );
    assert_fails(&r, 2, &["found 'sometimes'"]);
    assert!(!db.exists(), "a bad schema created the database");
    let f = dir.path().join("bad.txt");
    std::fs::write(&f, "table t (a u64 b str) primary key (a)").unwrap();
    let r = run(&db, &["create-table", "--file", path_str(&f)]);
    assert_fails(&r, 2, &["invalid schema in", "bad.txt", "found 'b'"]);
    let r = run(
        &db,
        &["create-table", "--file", path_str(&dir.path().join("missing.txt"))],
    );
    assert_fails(&r, 1, &["cannot read", "missing.txt"]);
}

#[test]
fn csv_type_error_loads_only_the_batches_before_it() {
    let (dir, db) = new_db();
    ok(&db, &["create-table", PEOPLE]);
    let people: Vec<Person> = (0..250).map(person).collect();
    let mut text = people_csv(&people);
    // Row 228 (0-based) is on line 230 (line 1 is the header); it is in the third batch
    // of 100 (lines 202-301).
    let bad = &people[228];
    let good_line = format!(",{},{},", bad.id, bad.age);
    assert!(text.contains(&good_line));
    text = text.replacen(&good_line, &format!(",{},{}x,", bad.id, bad.age), 1);
    let csv = dir.path().join("bad.csv");
    std::fs::write(&csv, text).unwrap();
    let r = run(&db, &["load", "people", path_str(&csv), "--batch", "100"]);
    assert_fails(
        &r,
        1,
        &[
            "line 230: ",
            "field 'age' expects i64",
            "200 rows were loaded before it",
            "lines 202-230",
        ],
    );
    assert_eq!(ok(&db, &["select", "people", "--count"]), "200\n");
    let loaded: Vec<&Person> = people[..200].iter().collect();
    assert_eq!(jsonl(&ok(&db, &["select", "people"])), jsons(&loaded));
    for p in &people[200..229] {
        assert_fails(&run(&db, &["row-get", "people", &p.id.to_string()]), 1, &["not found"]);
    }
    let out = ok(&db, &["check"]);
    assert!(out.starts_with("table people: 200 rows\n"), "{out}");

    // A JSON Lines file with a bad value: same rule; nothing of the bad batch.
    let rows: Vec<Person> = (1000..1010).map(person).collect();
    let mut lines: Vec<String> = rows.iter().map(|p| p.json().to_string()).collect();
    lines[6] = lines[6].replace("\"active\":", "\"active\":\"yes\",\"x\":");
    let jl = dir.path().join("bad.jsonl");
    std::fs::write(&jl, lines.join("\n")).unwrap();
    let r = run(&db, &["load", "people", path_str(&jl), "--batch", "4"]);
    assert_fails(
        &r,
        1,
        &[
            "line 7: ",
            "field 'active' expects bool",
            "4 rows were loaded before it",
        ],
    );
    assert_eq!(ok(&db, &["select", "people", "--count"]), "204\n");

    // A duplicate primary key in insert mode names both lines.
    let dup = dir.path().join("dup.csv");
    let dups = [person(2000), person(2001), person(2000)];
    std::fs::write(&dup, people_csv(&dups)).unwrap();
    let r = run(&db, &["load", "people", path_str(&dup)]);
    assert_fails(
        &r,
        1,
        &[
            "line 4: ",
            "duplicate primary key (6001) (also on line 2)",
            "0 rows were loaded",
        ],
    );
    // A key that exists already.
    let r = run(&db, &["load", "people", path_str(&csv), "--batch", "10"]);
    assert_fails(&r, 1, &["line 2: ", "duplicate primary key (1)", "0 rows were loaded"]);
    // ... but replace mode overwrites it, up to the bad line.
    let r = run(
        &db,
        &["load", "people", path_str(&csv), "--batch", "10", "--mode", "replace"],
    );
    assert_fails(&r, 1, &["line 230: ", "220 rows were loaded before it"]);
    assert_eq!(ok(&db, &["select", "people", "--count"]), "224\n");

    // Header problems are on line 1; wrong cell counts on their line.
    let h = dir.path().join("h.csv");
    std::fs::write(&h, "id,name,nope\n1,a,b\n").unwrap();
    assert_fails(
        &run(&db, &["load", "people", path_str(&h)]),
        1,
        &["line 1: ", "unknown field 'nope'"],
    );
    std::fs::write(&h, "id,name,age,score\n1,a,2,3\n").unwrap();
    assert_fails(
        &run(&db, &["load", "people", path_str(&h)]),
        1,
        &["line 1: ", "lacks field 'active'"],
    );
    std::fs::write(&h, "id,name,age,score,active\n1,a,2,3,true\n5,b,2\n").unwrap();
    assert_fails(
        &run(&db, &["load", "people", path_str(&h)]),
        1,
        &["line 3: ", "3 cells", "header has 5"],
    );
    assert_eq!(ok(&db, &["select", "people", "--count"]), "224\n");
}

#[test]
fn unknown_tables_indexes_and_bad_arguments_fail_cleanly() {
    let (dir, db) = new_db();
    ok(&db, &["create-table", PEOPLE]);
    ok(&db, &["insert", "people", &person(1).json().to_string()]);
    let csv = dir.path().join("x.csv");
    std::fs::write(&csv, "id\n").unwrap();
    for args in [
        &["row-get", "nope", "1"][..],
        &["select", "nope"],
        &["row-delete", "nope", "1"],
        &["insert", "nope", "{}"],
        &["update", "nope", "1", "--set", "a=1"],
        &["load", "nope", path_str(&csv)],
        &["drop-table", "nope"],
        &["drop-index", "nope", "ix"],
        &["create-index", "nope", "ix", "a"],
    ] {
        assert_fails(
            &run(&db, args),
            1,
            &["table \"nope\" not found", "existing tables: people"],
        );
    }
    assert_all_fail(
        &db,
        &[
            (
                &["select", "people", "--index", "nope"],
                1,
                &["index \"nope\" not found in table \"people\" (indexes: primary, by_city)"],
            ),
            (&["drop-index", "people", "nope"], 1, &["index \"nope\" not found"]),
            // Wrong number or type of primary key values.
            (
                &["row-get", "people", "1", "2"],
                2,
                &["primary key of 1 field (id), 2 values given"],
            ),
            (
                &["update", "people", "1", "2", "--set", "age=1"],
                2,
                &["2 values given"],
            ),
            (&["row-get", "people", "x"], 2, &["field 'id' expects u64, got \"x\""]),
        ],
    );
    let r = run(&db, &["row-delete", "people"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);

    // Bad --eq / range / --set / JSON values.
    assert_all_fail(
        &db,
        &[
            (
                &[
                    "select", "people", "--index", "by_city", "--eq", "a", "--eq", "1", "--eq", "2",
                ],
                2,
                &["index \"by_city\" has 2 fields (city, age): 3 --eq values given"],
            ),
            (
                &["select", "people", "--eq", "1", "--from", "2"],
                2,
                &["1 --eq value and a range given"],
            ),
            (
                &["select", "people", "--index", "by_city", "--eq", "a", "--from", "x"],
                2,
                &["--from: field 'age' expects i64"],
            ),
            (&["select", "people", "--from", "9", "--to", "3"], 2, &["sorts after"]),
            (&["update", "people", "1", "--set", "age"], 2, &["not FIELD=VALUE"]),
            (&["update", "people", "1", "--set", "zz=1"], 2, &["no field \"zz\""]),
            (&["update", "people", "1", "--set", "id=5"], 2, &["primary key field"]),
            (
                &["update", "people", "1", "--set", "age=null"],
                2,
                &["field 'age' (i64) is not nullable"],
            ),
            (&["insert", "people", "{\"id\":9"], 2, &["invalid JSON"]),
            (&["insert", "people", "[]"], 2, &["expected a JSON object"]),
            (
                &["insert", "people", "{\"id\":9,\"name\":\"x\",\"age\":1,\"score\":1}"],
                2,
                &["field 'active' (bool) is missing"],
            ),
            (
                &["load", "people", path_str(&dir.path().join("x.txt"))],
                2,
                &["--format"],
            ),
            (&["load", "people", path_str(&csv), "--batch", "0"], 2, &["--batch"]),
            (
                &["load", "people", path_str(&dir.path().join("no.csv"))],
                1,
                &["cannot open"],
            ),
        ],
    );
    // Nothing changed.
    assert_eq!(jsonl(&ok(&db, &["select", "people"])), vec![person(1).json()]);
}

#[test]
fn commands_on_a_missing_database_fail_without_creating_it() {
    let (_t, db) = new_db();
    for args in [&["tables"][..], &["select", "t"], &["check"], &["table-stats", "t"]] {
        assert_fails(&run(&db, args), 1, &["not a Strata database"]);
    }
    assert!(!db.exists());
}

#[test]
fn load_commit_failure_names_the_batch_and_stdin_loads() {
    let (dir, db) = new_db();
    ok(
        &db,
        &[
            "create-table",
            "table u (id u64, email str null) primary key (id) index by_email unique (email)",
        ],
    );
    // The unique index refuses line 6 when its batch (lines 6-7) commits; NULLs never
    // conflict.
    let f = dir.path().join("u.csv");
    std::fs::write(&f, "id,email\n1,a@x\n2,b@x\n3,\n4,\n5,a@x\n6,c@x\n").unwrap();
    let r = run(&db, &["load", "u", path_str(&f), "--mode", "replace", "--batch", "2"]);
    assert_fails(
        &r,
        1,
        &[
            "lines 6-7: ",
            "duplicate key in unique index \"by_email\"",
            "4 rows were loaded before it (the batch of lines 6-7 was not loaded)",
        ],
    );
    assert_eq!(
        ok(&db, &["select", "u", "--format", "tsv"]),
        "id\temail\n1\ta@x\n2\tb@x\n3\t\\N\n4\t\\N\n"
    );

    // `-` reads standard input (the format must be given).
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("--db")
        .arg(&db)
        .args(["load", "u", "-", "--format", "jsonl"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"{\"id\":7,\"email\":\"z@x\"}\n{\"id\":8}\n").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "loaded 2 rows into table u\n");
    assert_eq!(
        ok(&db, &["select", "u", "--index", "by_email", "--eq", "null", "--count"]),
        "3\n"
    );
    assert_eq!(
        jsonl(&ok(&db, &["select", "u", "--index", "by_email", "--from", "b"])),
        vec![json!({"id": 2, "email": "b@x"}), json!({"id": 7, "email": "z@x"})]
    );
    assert_fails(&run(&db, &["load", "u", "-"]), 2, &["pass --format"]);
}

/// `table-delete-key` and `table-delete-where`: rows leave the primary key and the
/// indexes at once, bad input changes nothing, `check` passes before and after a
/// compaction.
#[test]
fn table_delete_where_deletes_by_the_delete_key() {
    let (_dir, db) = new_db();
    ok(
        &db,
        &[
            "create-table",
            "table ev (id u64, ts i64, kind str) primary key (id) index by_kind (kind) eager",
        ],
    );
    ok(&db, &["table-delete-key", "ev", "ts", "--h", "4"]);
    for (id, ts) in [(1, -20), (2, -5), (3, 0), (4, 7), (5, 30)] {
        ok(
            &db,
            &["replace", "ev", &format!(r#"{{"id": {id}, "ts": {ts}, "kind": "k"}}"#)],
        );
    }
    let ids = |db: &Path| -> Vec<u64> {
        ok(db, &["select", "ev", "--index", "by_kind", "--eq", "k"])
            .lines()
            .map(|l| serde_json::from_str::<J>(l).expect("json")["id"].as_u64().expect("id"))
            .collect()
    };
    assert_fails(
        &run(&db, &["table-delete-where", "ev", "kind", "--to", "x"]),
        1,
        &["not the delete key"],
    );
    assert_fails(
        &run(&db, &["table-delete-where", "ev", "nope"]),
        2,
        &["no field \"nope\""],
    );
    assert_fails(
        &run(&db, &["table-delete-where", "ev", "ts", "--from", "a"]),
        2,
        &["--from"],
    );
    assert_fails(
        &run(&db, &["table-delete-where", "ev", "ts", "--from", "3", "--to", "3"]),
        1,
        &["empty"],
    );
    assert_fails(&run(&db, &["table-delete-key", "ev", "id"]), 1, &["cannot change"]);
    assert_fails(
        &run(&db, &["table-delete-key", "ev", "ts", "--h", "0"]),
        2,
        &["1..=256"],
    );
    assert_eq!(ids(&db), [1, 2, 3, 4, 5], "bad input changed nothing");
    ok(
        &db,
        &[
            "table-delete-where",
            "ev",
            "ts",
            "--from",
            "-5",
            "--to",
            "7",
            "--to-inclusive",
        ],
    );
    assert_eq!(ids(&db), [1, 5]);
    assert_fails(&run(&db, &["row-get", "ev", "3"]), 1, &["not found"]);
    ok(&db, &["table-delete-where", "ev", "ts", "--to", "0"]);
    assert_eq!(ids(&db), [5]);
    assert!(ok(&db, &["tables", "--schema"]).contains("delete key (ts)"));
    ok(&db, &["check"]);
    ok(&db, &["check", "--compact"]);
    assert_eq!(ids(&db), [5]);
}
