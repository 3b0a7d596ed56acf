console.log(JSON.stringify({node: process.version, uid: process.getuid()}));
