//! The OpenAPI document against the router it describes and the committed copy.

use super::*;
use std::collections::BTreeSet;

/// `(METHOD, path)` of every route `router` declares under `/api/`, read from its source.
fn router_routes() -> BTreeSet<(String, String)> {
    let src = include_str!("mod.rs");
    let mut out = BTreeSet::new();
    for call in src.split(".route(\"").skip(1) {
        let (path, rest) = call.split_once('"').expect("a route's path");
        let handlers = rest.split_once(")\n").map_or(rest, |(h, _)| h);
        for m in ["get", "post", "put", "delete", "patch"] {
            let called = handlers
                .match_indices(&format!("{m}("))
                .any(|(i, _)| i == 0 || !handlers.as_bytes()[i - 1].is_ascii_alphanumeric() && handlers.as_bytes()[i - 1] != b'_');
            if called && path.starts_with("/api/") {
                out.insert((m.to_uppercase(), path.to_string()));
            }
        }
    }
    out
}

/// `(METHOD, path)` of every operation in the document.
fn documented() -> BTreeSet<(String, String)> {
    let doc = serde_json::to_value(document()).unwrap();
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for m in item.as_object().unwrap().keys().filter(|k| ["get", "post", "put", "delete", "patch"].contains(&k.as_str())) {
            out.insert((m.to_uppercase(), path.clone()));
        }
    }
    out
}

#[test]
fn every_route_in_the_router_is_documented_and_nothing_else() {
    let (routes, documented) = (router_routes(), documented());
    assert!(routes.len() >= 70, "reading the router found only {} routes", routes.len());
    let missing: Vec<_> = routes.difference(&documented).collect();
    assert!(missing.is_empty(), "routes missing from the OpenAPI document (add them to ROUTES): {missing:?}");
    let stale: Vec<_> = documented.difference(&routes).collect();
    assert!(stale.is_empty(), "documented routes the router does not have: {stale:?}");
}

#[test]
fn every_reference_resolves_to_a_component() {
    let text = document_json();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for part in text.split("\"$ref\": \"#/components/schemas/").skip(1) {
        let name = part.split('"').next().unwrap();
        assert!(schemas.contains_key(name), "{name} is referenced but not a component");
    }
}

#[test]
fn serde_attributes_shape_the_schemas() {
    let doc = serde_json::to_value(document()).unwrap();
    let s = &doc["components"]["schemas"];
    // `#[serde(default)]` fields may be left out of a request; the rest must be there.
    let required = |name: &str| -> Vec<String> {
        s[name]["required"].as_array().map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect()).unwrap_or_default()
    };
    assert!(required("StartSession").contains(&"device".to_string()));
    assert!(!required("StartSession").contains(&"unconfined".to_string()));
    // What is only ever sent has every field, defaults included (nothing is skipped).
    assert!(required("SessionView").contains(&"live".to_string()) && required("SessionView").contains(&"exit_code".to_string()));
    assert!(!required("CreateTask").contains(&"spend_cap_usd".to_string()));
    // Tagged enums keep their tag.
    let offer = s["SandboxOffer"].to_string();
    assert!(offer.contains("\"state\"") && offer.contains("\"unavailable\""), "{offer}");
    let viewer = s["ViewerEvent"].to_string();
    assert!(viewer.contains("\"type\"") && viewer.contains("\"ended\""), "{viewer}");
    assert_eq!(s["Outcome"]["enum"][6], "lost");
    // Every operation answers errors with ErrorBody.
    let op = &doc["paths"]["/api/v1/sessions/{id}"]["get"];
    assert_eq!(op["responses"]["default"]["content"]["application/json"]["schema"]["$ref"], "#/components/schemas/ErrorBody");
    assert_eq!(op["parameters"][0]["in"], "path");
}

#[test]
fn the_committed_document_is_the_generated_one() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../web/openapi.json");
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == document_json(),
        "web/openapi.json is stale: run `cargo run -p drover-server --example openapi > web/openapi.json`, then `cd web && npm run gen`"
    );
}
