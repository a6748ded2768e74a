//! The HTTP API contract under `/api/v1`: the JSON bodies the server sends and takes,
//! shared by the server, the CLI and (through the generated OpenAPI document) the web app.

pub mod catalog;
pub mod devices;
pub mod inbox;
pub mod members;
pub mod outcomes;
pub mod overview;
pub mod push;
pub mod schema;
pub mod sessions;
pub mod spend;
pub mod tasks;
pub mod webhooks;

pub use catalog::*;
pub use devices::*;
pub use inbox::*;
pub use members::*;
pub use outcomes::*;
pub use overview::*;
pub use push::*;
pub use sessions::*;
pub use spend::*;
pub use tasks::*;
pub use webhooks::*;

/// The response header in which `GET /api/v1/health` gives the server's version
/// (`drover doctor` compares it with its own).
pub const VERSION_HEADER: &str = "drover-version";
