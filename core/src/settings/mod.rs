//! The settings: every option with its default, limits and validation (public as
//! `polylock::options`), and the TLS setup the options describe. The ACL rule as data
//! (`crate::acl::rules`) belongs to this layer too, in its own folder.

pub mod options;
pub(crate) mod tls;
