//! Prints the API's OpenAPI document, as committed in `web/openapi.json`:
//! `cargo run -p drover-server --example openapi > web/openapi.json`.

fn main() {
    print!("{}", drover_server::api::openapi::document_json());
}
