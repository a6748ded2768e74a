//! The HTTP API contract under `/api/v1`: the JSON bodies the server sends and takes,
//! shared by the server, the CLI and (through the generated OpenAPI document) the web app.

pub mod catalog;
pub mod devices;
pub mod members;
pub mod outcomes;
pub mod overview;
pub mod schema;
pub mod sessions;
pub mod spend;
pub mod tasks;
pub mod webhooks;

pub use catalog::*;
pub use devices::*;
pub use members::*;
pub use outcomes::*;
pub use overview::*;
pub use sessions::*;
pub use spend::*;
pub use tasks::*;
pub use webhooks::*;
