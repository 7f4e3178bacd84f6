//! Users and their command permissions (a subset of Redis ACLs: passwords,
//! on/off, and commands or categories allowed; every key is allowed).

use std::collections::BTreeMap;
use std::sync::Arc;

/// What ACL rules know of a command: its name, its categories, and
/// whether it takes keys (`@keyspace`). Given in the command table's order.
#[derive(Debug, Clone, Copy)]
pub struct Rights {
    pub name: &'static str,
    pub categories: &'static [&'static str],
    pub keys: bool,
}

/// One user.
#[derive(Debug, Clone)]
pub struct User {
    pub enabled: bool,
    pub nopass: bool,
    pub passwords: Vec<String>,
    /// Indexed like the command table.
    pub allowed: Arc<Vec<bool>>,
}

impl User {
    fn all(enabled: bool, commands: usize) -> User {
        User { enabled, nopass: false, passwords: Vec::new(), allowed: Arc::new(vec![enabled; commands]) }
    }

    /// Whether `password` opens this user (a constant-time compare per
    /// stored password, so timing does not reveal a prefix).
    pub fn accepts(&self, password: &[u8]) -> bool {
        self.enabled && (self.nopass || self.passwords.iter().any(|p| constant_time_eq(p.as_bytes(), password)))
    }

    /// The user as `ACL LIST` prints it.
    pub fn describe(&self, name: &str, commands: &[Rights]) -> String {
        let mut s = format!("user {name} {}", if self.enabled { "on" } else { "off" });
        if self.nopass {
            s.push_str(" nopass");
        }
        for p in &self.passwords {
            s.push_str(&format!(" #{}", fingerprint(p)));
        }
        s.push_str(" ~* &*");
        if self.allowed.iter().all(|&a| a) {
            s.push_str(" +@all");
        } else {
            s.push_str(" -@all");
            for (c, _) in commands.iter().zip(self.allowed.iter()).filter(|(_, &a)| a) {
                s.push_str(&format!(" +{}", c.name));
            }
        }
        s
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = (a.len() != b.len()) as u8;
    for (i, &x) in a.iter().enumerate() {
        diff |= x ^ b.get(i).copied().unwrap_or(!x);
    }
    diff == 0
}

/// Not Redis's SHA-256 (we keep no hash function for it): a stable
/// fingerprint so `ACL LIST` never prints a password.
fn fingerprint(p: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in p.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    format!("{h:016x}")
}

/// Every user, by name, and the commands their permissions name.
#[derive(Debug)]
pub struct Users {
    pub users: BTreeMap<String, User>,
    pub commands: &'static [Rights],
}

impl Users {
    /// The `default` user: every one of `commands`, with `requirepass` if
    /// given.
    pub fn new(requirepass: Option<&str>, commands: &'static [Rights]) -> Users {
        let mut default = User::all(true, commands.len());
        match requirepass {
            Some(p) => default.passwords = vec![p.to_string()],
            None => default.nopass = true,
        }
        Users { users: BTreeMap::from([("default".to_string(), default)]), commands }
    }

    /// Sets the default user's password (CONFIG SET requirepass; "" clears).
    pub fn set_requirepass(&mut self, p: &str) {
        let n = self.commands.len();
        let d = self.users.entry("default".into()).or_insert_with(|| User::all(true, n));
        d.passwords.clear();
        d.nopass = p.is_empty();
        if !p.is_empty() {
            d.passwords.push(p.to_string());
        }
    }

    /// Applies ACL SETUSER rules to `name` (created off with no commands).
    pub fn set_user(&mut self, name: &str, rules: &[&[u8]]) -> Result<(), String> {
        let commands = self.commands;
        let mut u = self.users.get(name).cloned().unwrap_or_else(|| User::all(false, commands.len()));
        let mut allowed = (*u.allowed).clone();
        for rule in rules {
            let r = String::from_utf8_lossy(rule);
            match r.as_ref() {
                "on" => u.enabled = true,
                "off" => u.enabled = false,
                "nopass" => {
                    u.nopass = true;
                    u.passwords.clear();
                }
                "resetpass" => {
                    u.nopass = false;
                    u.passwords.clear();
                }
                "allcommands" | "+@all" => allowed.iter_mut().for_each(|a| *a = true),
                "nocommands" | "-@all" => allowed.iter_mut().for_each(|a| *a = false),
                "allkeys" | "~*" | "allchannels" | "&*" | "resetkeys" | "resetchannels" => {}
                "reset" => {
                    u = User::all(false, commands.len());
                    allowed = vec![false; commands.len()];
                }
                _ if r.starts_with('>') => {
                    u.nopass = false;
                    if !u.passwords.iter().any(|p| p == &r[1..]) {
                        u.passwords.push(r[1..].to_string());
                    }
                }
                _ if r.starts_with('<') => u.passwords.retain(|p| p != &r[1..]),
                _ if r.starts_with("+@") || r.starts_with("-@") => {
                    let cat = &r[2..];
                    let on = r.starts_with('+');
                    let mut any = false;
                    for (c, a) in commands.iter().zip(allowed.iter_mut()) {
                        if c.categories.contains(&cat) || (cat == "keyspace" && c.keys) {
                            *a = on;
                            any = true;
                        }
                    }
                    if !any {
                        return Err(format!(
                            "ERR Error in ACL SETUSER modifier '{r}': Unknown command or category name in ACL"
                        ));
                    }
                }
                _ if r.starts_with('+') || r.starts_with('-') => {
                    let Some(i) = commands.iter().position(|c| c.name.eq_ignore_ascii_case(&r[1..])) else {
                        return Err(format!(
                            "ERR Error in ACL SETUSER modifier '{r}': Unknown command or category name in ACL"
                        ));
                    };
                    allowed[i] = r.starts_with('+');
                }
                _ if r.starts_with('~') || r.starts_with('%') || r.starts_with('&') => {
                    return Err(format!("ERR Error in ACL SETUSER modifier '{r}': epochdb ACLs allow every key"));
                }
                _ => return Err(format!("ERR Error in ACL SETUSER modifier '{r}': Syntax error")),
            }
        }
        u.allowed = Arc::new(allowed);
        self.users.insert(name.to_string(), u);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_grant_and_revoke() {
        const R: &[&str] = &["read"];
        static COMMANDS: &[Rights] = &[
            Rights { name: "get", categories: R, keys: true },
            Rights { name: "hgetall", categories: R, keys: true },
            Rights { name: "set", categories: &["write"], keys: true },
            Rights { name: "keys", categories: R, keys: false },
        ];
        let mut users = Users::new(None, COMMANDS);
        users.set_user("app", &[b"on", b">s3cret", b"+@read", b"-keys"]).unwrap();
        let u = &users.users["app"];
        assert!(u.accepts(b"s3cret") && !u.accepts(b"s3cre") && !u.accepts(b"s3crets"));
        let allowed = |n: &str| u.allowed[COMMANDS.iter().position(|c| c.name == n).unwrap()];
        assert!(allowed("get") && allowed("hgetall") && !allowed("set") && !allowed("keys"));
        assert!(users.set_user("x", &[b"+nosuch"]).is_err());
        assert!(users.set_user("x", &[b"~user:*"]).is_err());
    }
}
