//! A prepared call of a script, as the core sends its scripts.

use redis::{Arg, Cmd, ErrorKind, FromRedisValue, ServerErrorKind, ToRedisArgs};

/// A prepared call of a script (`EVALSHA`, loading the script when the server lacks it), with
/// its keys and arguments. What `redis::ScriptInvocation` does, but each list of arguments is
/// written into one buffer (a `Cmd`'s), where the crate's takes an allocation per argument and
/// frees it after the call: a lock's cycle makes two calls of nine and seven arguments.
pub(crate) struct ScriptCall {
    script: &'static redis::Script,
    keys: Cmd,
    args: Cmd,
}

impl ScriptCall {
    pub(crate) fn new(script: &'static redis::Script) -> ScriptCall {
        // Room for what a lock's calls send (at most 5 keys and 6 arguments, under 400 bytes).
        ScriptCall {
            script,
            keys: Cmd::with_capacity(5, 256),
            args: Cmd::with_capacity(6, 128),
        }
    }

    /// Adds `KEYS[n]`.
    pub(crate) fn key<T: ToRedisArgs>(&mut self, key: T) -> &mut Self {
        key.write_redis_args(&mut self.keys);
        self
    }

    /// Adds `ARGV[n]`.
    pub(crate) fn arg<T: ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        arg.write_redis_args(&mut self.args);
        self
    }

    /// The `EVALSHA` command of this call.
    pub(crate) fn eval_cmd(&self) -> Cmd {
        let key_count = self.keys.args_iter().len();
        let all = || self.keys.args_iter().chain(self.args.args_iter());
        let bytes: usize = all()
            .map(|arg| match arg {
                Arg::Simple(bytes) => bytes.len(),
                _ => 0,
            })
            .sum();
        // EVALSHA, the script's hash and the key count come first.
        let count = key_count + self.args.args_iter().len();
        let mut cmd = Cmd::with_capacity(3 + count, 64 + bytes);
        cmd.arg("EVALSHA")
            .arg(self.script.get_hash())
            .arg(key_count);
        for arg in all() {
            if let Arg::Simple(bytes) = arg {
                cmd.arg(bytes);
            }
        }
        cmd
    }

    /// Sends the call; when the server lacks the script, loads it and sends the call again.
    pub(crate) async fn invoke_async<T: FromRedisValue>(
        &self,
        con: &mut impl redis::aio::ConnectionLike,
    ) -> redis::RedisResult<T> {
        let eval = self.eval_cmd();
        match eval.query_async(con).await {
            Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                self.load_async(con).await?;
                eval.query_async(con).await
            }
            reply => reply,
        }
    }

    /// [`ScriptCall::invoke_async`] on a blocking connection (tests).
    #[cfg(test)]
    pub(crate) fn invoke<T: FromRedisValue>(
        &self,
        con: &mut dyn redis::ConnectionLike,
    ) -> redis::RedisResult<T> {
        let eval = self.eval_cmd();
        match eval.query(con) {
            Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                self.script.load(con)?;
                eval.query(con)
            }
            reply => reply,
        }
    }

    /// Loads the script (`SCRIPT LOAD`).
    pub(crate) async fn load_async(
        &self,
        con: &mut impl redis::aio::ConnectionLike,
    ) -> redis::RedisResult<String> {
        self.script.load_async(con).await
    }
}
