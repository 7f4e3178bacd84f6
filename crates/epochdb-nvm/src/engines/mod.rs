//! The six storage engines of the NVM study, each in its own module.

pub mod inp;
pub mod nvm_inp;
