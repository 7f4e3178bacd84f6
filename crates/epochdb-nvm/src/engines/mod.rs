//! The six storage engines of the NVM study, each in its own module
//! (NVM-CoW is CoW's engine over another medium).

pub mod cow;
pub mod inp;
pub mod log;
pub mod nvm_cow;
pub mod nvm_inp;
pub mod nvm_log;
